"""Metric storage (SPEC §7): one wide row per VM per sample, per-minute and per-hour rollups,
and the bearer token a VM's agent writes with.

``Sample`` is partitioned by day on PostgreSQL; the partitioned DDL lives in migration 0001
(Django cannot declare ``PARTITION BY``), the model here is the ORM's view of the same table.
On SQLite the migration creates it as a plain table from this model.

Utilisations are percentages (0-100), throughputs bytes per second. GPU and fabric columns
are NULL on a VM without a GPU or without a fabric port, so an average never counts a
missing device as idle.
"""

from django.db import models
from django.utils.translation import gettext_lazy as _

from portal.models import user_reference
from vms.models import VirtualMachine, vm_reference

# (name, nullable, lowest, highest): the fields of a sample as the agent sends them and as
# they are stored. One table for validation, storage and rollups, so they cannot drift.
PERCENT = (0.0, 100.0)
# 1e12 B/s = 8 Tbit/s: above any NIC or HCA a VM can have; a bigger figure is a counter bug.
RATE = (0.0, 1e12)
METRIC_FIELDS = (
    ("cpu_util", False, *PERCENT),
    ("mem_util", False, *PERCENT),
    ("gpu_util", True, *PERCENT),
    ("gpu_mem_util", True, *PERCENT),
    ("net_rx", False, *RATE),
    ("net_tx", False, *RATE),
    ("fabric_rx", True, *RATE),
    ("fabric_tx", True, *RATE),
)
METRIC_NAMES = tuple(name for name, *_rest in METRIC_FIELDS)


def unchecked_vm():
    """The VM a row of a series belongs to, with no database FK: a foreign-key check per row
    would cost COPY more than the row itself, and VMs are only ever soft-deleted, so a row
    never points at a missing VM."""
    return models.ForeignKey(
        VirtualMachine,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )


class Sample(models.Model):
    """What one VM measured at one instant. Written by COPY, never updated."""

    pk = models.CompositePrimaryKey("vm_id", "ts")
    vm = unchecked_vm()
    ts = models.DateTimeField()
    cpu_util = models.FloatField()
    mem_util = models.FloatField()
    gpu_util = models.FloatField(null=True)
    gpu_mem_util = models.FloatField(null=True)
    net_rx = models.FloatField()
    net_tx = models.FloatField()
    fabric_rx = models.FloatField(null=True)
    fabric_tx = models.FloatField(null=True)
    # The VM's cluster when the sample was written (None: in no cluster), taken from the VM
    # row by the same statement. The cluster rollups count a sample for this cluster, so
    # membership changes never move history (metrics.models.cluster).
    cluster_id = models.BigIntegerField(null=True)

    class Meta:
        # On PostgreSQL this index is a BRIN (see migration 0001): samples arrive in time
        # order, so a few pages of summary answer "rows of the last minutes" for the rollups.
        indexes = [models.Index(fields=["ts"], name="metrics_sample_ts")]

    def __str__(self):
        return f"{self.vm_id} @ {self.ts:%Y-%m-%d %H:%M:%S}"


class Rollup(models.Model):
    """Avg and max per metric of one VM over one bucket, and how many samples it summarises."""

    pk = models.CompositePrimaryKey("vm_id", "bucket")
    vm = unchecked_vm()
    bucket = models.DateTimeField()
    n = models.PositiveIntegerField()
    cpu_util_avg = models.FloatField()
    cpu_util_max = models.FloatField()
    mem_util_avg = models.FloatField()
    mem_util_max = models.FloatField()
    gpu_util_avg = models.FloatField(null=True)
    gpu_util_max = models.FloatField(null=True)
    gpu_mem_util_avg = models.FloatField(null=True)
    gpu_mem_util_max = models.FloatField(null=True)
    net_rx_avg = models.FloatField()
    net_rx_max = models.FloatField()
    net_tx_avg = models.FloatField()
    net_tx_max = models.FloatField()
    fabric_rx_avg = models.FloatField(null=True)
    fabric_rx_max = models.FloatField(null=True)
    fabric_tx_avg = models.FloatField(null=True)
    fabric_tx_max = models.FloatField(null=True)

    class Meta:
        abstract = True

    def __str__(self):
        return f"{self.vm_id} @ {self.bucket:%Y-%m-%d %H:%M}"


class MinuteRollup(Rollup):
    # The cluster its samples were stamped with (``Sample.cluster_id``): what the cluster
    # rollups group members by.
    cluster_id = models.BigIntegerField(null=True)

    class Meta:
        indexes = [models.Index(fields=["bucket"], name="metrics_minute_bucket")]


class HourRollup(Rollup):
    class Meta:
        indexes = [models.Index(fields=["bucket"], name="metrics_hour_bucket")]


class RollupCursor(models.Model):
    """How far the rollups are done: one row, locked by the task so two runs never overlap."""

    name = models.CharField(max_length=20, primary_key=True)
    upto = models.DateTimeField()

    def __str__(self):
        return f"{self.name}: {self.upto:%Y-%m-%d %H:%M}"


class RollupBacklog(models.Model):
    """A late batch (an agent's backlog after an outage) landed in buckets already rolled up:
    the rollup task redoes this VM's buckets over [start, end] and deletes the row."""

    vm_id = models.BigIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()

    def __str__(self):
        return f"{self.vm_id}: {self.start:%Y-%m-%d %H:%M} – {self.end:%Y-%m-%d %H:%M}"


class MetricsToken(models.Model):
    """The bearer token of one VM's agent. Only its SHA-256 is kept; the token is shown once."""

    vm = vm_reference(models.CASCADE, "metrics_token", one_to_one=True)
    token_hash = models.CharField(_("토큰 해시"), max_length=64, unique=True)
    # The first characters, so a user can tell which token an agent has without the secret.
    prefix = models.CharField(_("토큰 앞부분"), max_length=12)
    created_by = user_reference(_("발급자"))
    created_at = models.DateTimeField(_("발급일"))

    class Meta:
        verbose_name = verbose_name_plural = _("메트릭 토큰")

    def __str__(self):
        return f"{self.vm_id}: {self.prefix}…"
