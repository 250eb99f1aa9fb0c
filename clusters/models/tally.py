"""Live clusters per project, kept as deltas: the cluster list's total read from a project's
few rows instead of counting its clusters (a count grows with them).

Database triggers append +1 or -1 as a cluster row is inserted, deleted, or crosses the line
between live and 삭제됨, whatever writes it (services, the admin, a bulk load, SQL by hand):
append-only, so no writer waits on another. Beat merges each project's deltas into one
(``clusters.tally``). The triggers are migration ``0014_live_cluster_tally_triggers``'s;
the merge is in ``clusters.tally``.
"""

from django.db import models


class LiveClusterTally(models.Model):
    """One delta of a project's live clusters (status other than 삭제됨); their sum is the
    count."""

    project = models.ForeignKey(
        "portal.Project", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    delta = models.IntegerField()

    class Meta:
        # The sum is read from the index alone (PostgreSQL; SQLite keeps the plain index).
        indexes = [models.Index(fields=["project"], include=["delta"], name="cluster_tally")]

    def __str__(self) -> str:
        return f"{self.project_id}: {self.delta:+d}"
