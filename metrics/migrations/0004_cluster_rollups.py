"""Per-cluster rollups (metrics.cluster_models) and the cluster stamp they group by.

metrics_sample.cluster_id is the VM's cluster when a sample is written; the per-VM minute
rollups keep it. On PostgreSQL the column is added to the partitioned parent, which adds it to
every day partition (a catalog change: no table rewrite).

Existing data: the minute rollups already stored are stamped with their VM's cluster at
migration time (the best knowledge there is of where they ran), and the cluster minute and hour
rows are built from them, so the 메트릭 tab keeps its history across the upgrade. Raw samples
written before it stay unstamped; a minute recomputed from them keeps its stamp.
"""

from django.db import migrations, models

# Frozen here: the metrics and figure columns as this migration creates them.
METRICS = {
    "gpu_util": "gpu_util_avg",
    "gpu_mem_util": "gpu_mem_util_avg",
    "cpu_util": "cpu_util_avg",
    "mem_util": "mem_util_avg",
    "net_rx": "net_rx_avg",
    "net_tx": "net_tx_avg",
    "fabric_rx": "fabric_rx_avg",
    "fabric_tx": "fabric_tx_avg",
    "link_gbps": None,
}
COUNTS = ("n", "minutes")
SUMS = ("sum", "sumsq", "minsum", "maxsum")
PEAKS = ("members_peak", "gpu_peak")


def _fields():
    fields = [
        ("pk", models.CompositePrimaryKey("cluster_id", "bucket", blank=True, editable=False, primary_key=True, serialize=False)),
        ("cluster_id", models.BigIntegerField()),
        ("bucket", models.DateTimeField()),
    ]
    fields += [(name, models.PositiveIntegerField()) for name in PEAKS]
    for metric in METRICS:
        fields += [(f"{metric}_{stat}", models.PositiveIntegerField()) for stat in COUNTS]
        fields += [(f"{metric}_{stat}", models.FloatField(null=True)) for stat in SUMS]
    return fields


def _columns():
    columns = list(PEAKS)
    for metric in METRICS:
        columns += [f"{metric}_{stat}" for stat in (*COUNTS, *SUMS)]
    return columns


def _stats(value):
    return [
        f"count({value})",
        f"CASE WHEN count({value}) > 0 THEN 1 ELSE 0 END",
        f"sum({value})",
        f"sum({value} * {value})",
        f"min({value})",
        f"max({value})",
    ]


def build_from_existing(apps, schema_editor):
    """Stamp the stored minute rollups, then make every cluster minute and hour row from them."""
    execute = schema_editor.execute
    execute(
        "UPDATE metrics_minuterollup SET cluster_id = "
        "(SELECT v.cluster_id FROM vms_virtualmachine v WHERE v.id = metrics_minuterollup.vm_id) "
        "WHERE cluster_id IS NULL"
    )
    figures = ["count(m.cpu_util_avg)", "count(m.gpu_util_avg)"]
    for column in METRICS.values():
        figures += _stats(f"m.{column}" if column else "p.link_gbps")
    columns = ", ".join(_columns())
    execute(
        f"INSERT INTO metrics_clusterminuterollup (cluster_id, bucket, {columns}) "
        f"SELECT m.cluster_id, m.bucket, {', '.join(figures)} FROM metrics_minuterollup m "
        "LEFT JOIN (SELECT vm_id, bucket, sum(rate_gbps_avg) AS link_gbps "
        "FROM metrics_portminuterollup GROUP BY vm_id, bucket) p "
        "ON p.vm_id = m.vm_id AND p.bucket = m.bucket "
        "WHERE m.cluster_id IS NOT NULL GROUP BY m.cluster_id, m.bucket"
    )
    if schema_editor.connection.vendor == "postgresql":
        hour = "date_trunc('hour', bucket)"
    else:
        hour = "strftime('%Y-%m-%d %H:00:00', bucket)"
    sums = ", ".join(f"max({c})" if c.endswith("_peak") else f"sum({c})" for c in _columns())
    execute(
        f"INSERT INTO metrics_clusterhourrollup (cluster_id, bucket, {columns}) "
        f"SELECT cluster_id, {hour} AS b, {sums} FROM metrics_clusterminuterollup "
        "GROUP BY cluster_id, b"
    )


class Migration(migrations.Migration):

    dependencies = [
        ('metrics', '0003_device_series'),
        ('vms', '0003_catalog_and_allocation_labels'),
    ]

    operations = [
        migrations.AddField(
            model_name='sample',
            name='cluster_id',
            field=models.BigIntegerField(null=True),
        ),
        migrations.AddField(
            model_name='minuterollup',
            name='cluster_id',
            field=models.BigIntegerField(null=True),
        ),
        migrations.CreateModel(
            name='ClusterMinuteRollup',
            fields=_fields(),
            options={
                'indexes': [models.Index(fields=['bucket'], name='metrics_clusterminute_bucket')],
            },
        ),
        migrations.CreateModel(
            name='ClusterHourRollup',
            fields=_fields(),
            options={
                'indexes': [models.Index(fields=['bucket'], name='metrics_clusterhour_bucket')],
            },
        ),
        migrations.RunPython(build_from_existing, migrations.RunPython.noop),
    ]
