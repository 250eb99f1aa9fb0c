"""What the cluster list reads: its rows (a page of a project's clusters, filtered), their
member counts, and its total; module-level functions of the request's values, so that
``portal.speed.statements`` compiles each shape once (``portal.web.listing.Rows``)."""

from django.db.models import Count, F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from clusters import tally
from clusters.models import VirtualCluster
from vms.models import VirtualMachine

# What a row of the cluster list shows (and the annotations it is read with).
LIST_FIELDS = (
    "id",
    "project_id",
    "name",
    "status",
    "fabric_type",
    "created_at",
    "member_count",
    "zone_code",
    "type_code",
)
# Members per cluster as a correlated subquery: it runs for the 50 rows shown, where
# Count("members") made PostgreSQL aggregate every cluster of the project (GROUP BY), in the
# page query and again in the paginator's COUNT, which cannot drop an aggregate annotation.
MEMBER_COUNT = Coalesce(
    Subquery(
        VirtualMachine.objects.filter(cluster=OuterRef("pk"))
        .order_by()
        .values("cluster")
        .annotate(n=Count("pk"))
        .values("n")
    ),
    0,
)


def listed_clusters(projects, project, status, zone, q) -> QuerySet:
    """The project's clusters the reader may see (``projects``: None, all), filtered: 삭제됨
    is hidden unless asked for."""
    clusters = VirtualCluster.objects.within(projects).filter(project=project)
    clusters = clusters.filter(status=status) if status else clusters.alive()
    if zone:
        clusters = clusters.filter(zone=zone)
    if q:
        clusters = clusters.filter(name__icontains=q)
    return clusters


def listed_total(projects, project, status, zone, q):
    """The unfiltered list's total, from the live clusters' tally (read in a row or a few,
    not counted over the project's clusters); a filtered list's rows are counted."""
    if status or zone or q:
        return None
    return tally.live_total(project, projects)


def shown_clusters(shown: QuerySet) -> QuerySet:
    """A row shows two codes, not the catalog objects: the codes are read, not models."""
    return shown.annotate(
        member_count=MEMBER_COUNT, zone_code=F("zone__code"), type_code=F("instance_type__code")
    )
