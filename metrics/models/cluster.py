"""Per-cluster rollups: what a cluster's 메트릭 charts draw, per minute and per hour, so a chart
reads one row per bucket however many members the cluster has.

A minute row summarises the members that reported in that minute *as members of that
cluster*: each member's mean over its own samples of the minute (its ``MinuteRollup``), then
across those members. The cluster a sample belongs to is stamped on it when it is written
(``Sample.cluster_id``: the VM's cluster at that moment), so attaching, detaching or replacing a
member never moves history from one cluster to another.

Each metric keeps six figures, all of them sums, so that rows add up exactly: an hour row is
the sum of its minute rows, and a chart bucket of several minutes or hours is the sum of its
rows, whatever table each part came from (``metrics.storage.cluster_series``):

- ``<m>_n``: member-minutes with a value; ``<m>_minutes``: minutes in which any member had one;
- ``<m>_sum``, ``<m>_sumsq``: the sum and the sum of squares of the members' minute means;
- ``<m>_minsum``, ``<m>_maxsum``: the sum over the row's minutes of the lowest and of the
  highest member's minute mean (in a minute row, that minute's lowest and highest).

So over any bucket: the members' mean is ``sum / n``, the spread (standard deviation across
member-minutes) ``sqrt(sumsq / n - mean²)``, the slowest and the busiest member, minute by
minute, averaged over the bucket's minutes ``minsum / minutes`` and ``maxsum / minutes``, and a
throughput's cluster total, averaged over the minutes it was reported, ``sum / minutes``.
``members_peak`` / ``gpu_peak``: the most members reporting (reporting a GPU figure) in one
minute of the row.

``link_gbps`` is a member's fabric link rate in the minute (its ports' ``rate_gbps``, summed):
the fabric chart's "% of link" axis.
"""

from django.db import models

# (metric, the member-minute value's column in metrics_minuterollup, or None: computed)
CLUSTER_METRICS = (
    ("gpu_util", "gpu_util_avg"),
    ("gpu_mem_util", "gpu_mem_util_avg"),
    ("cpu_util", "cpu_util_avg"),
    ("mem_util", "mem_util_avg"),
    ("net_rx", "net_rx_avg"),
    ("net_tx", "net_tx_avg"),
    ("fabric_rx", "fabric_rx_avg"),
    ("fabric_tx", "fabric_tx_avg"),
    ("link_gbps", None),
)
CLUSTER_METRIC_NAMES = tuple(name for name, _column in CLUSTER_METRICS)
COUNTS = ("n", "minutes")
SUMS = ("sum", "sumsq", "minsum", "maxsum")
PEAKS = ("members_peak", "gpu_peak")


def stat_columns() -> list:
    """Every figure column but the key, in table order: the peaks, then six per metric."""
    columns = list(PEAKS)
    for name in CLUSTER_METRIC_NAMES:
        columns += [f"{name}_{stat}" for stat in (*COUNTS, *SUMS)]
    return columns


def _model(name: str, index: str) -> type[models.Model]:
    attrs: dict = {
        "__module__": __name__,
        "pk": models.CompositePrimaryKey("cluster_id", "bucket"),
        # No FK: clusters are only soft-deleted, and the rollup job writes by id.
        "cluster_id": models.BigIntegerField(),
        "bucket": models.DateTimeField(),
        "Meta": type(
            "Meta",
            (),
            {"app_label": "metrics", "indexes": [models.Index(fields=["bucket"], name=index)]},
        ),
        "__str__": lambda self: f"cluster {self.cluster_id} @ {self.bucket:%Y-%m-%d %H:%M}",
    }
    for column in PEAKS:
        attrs[column] = models.PositiveIntegerField()
    for metric in CLUSTER_METRIC_NAMES:
        for stat in COUNTS:
            attrs[f"{metric}_{stat}"] = models.PositiveIntegerField()
        for stat in SUMS:
            attrs[f"{metric}_{stat}"] = models.FloatField(null=True)
    return type(name, (models.Model,), attrs)


ClusterMinuteRollup = _model("ClusterMinuteRollup", "metrics_clusterminute_bucket")
ClusterHourRollup = _model("ClusterHourRollup", "metrics_clusterhour_bucket")
