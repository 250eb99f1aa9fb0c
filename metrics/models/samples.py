"""Metric storage: one wide row per VM per sample, per-minute and per-hour rollups,
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

from metrics.vm_agent import VERSION as PORTAL_VERSION
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


# How a row shows its instant.
SECONDS = "%Y-%m-%d %H:%M:%S"
MINUTES = "%Y-%m-%d %H:%M"


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


def series_model(
    name, time_column, fields, index, *, module, device=None, stamped=False, shown=SECONDS
):
    """A stored series' model, built from its field table (``fields``) so that no model lists
    the fields again. Keyed by (vm_id, ``time_column``[, ``device``]), its fields are the VM
    (``unchecked_vm``), the device's number, the instant, then one float per field for a raw
    row (instant "ts") or the sample count and each field's avg and max for a rollup
    ("bucket"), NULL where the table lets a field be missing. ``stamped``: the row keeps the
    cluster its samples were stamped with (``cluster_id``). One index, named ``index``, on the
    instant; a row shows its instant as ``shown``. ``module``: the module that binds the
    model to ``name`` (where pickling, the shell and the admin look it up)."""
    rollup = time_column == "bucket"  # a raw row's instant is "ts"
    keys = ("vm_id", time_column, device) if device else ("vm_id", time_column)
    attrs = {
        "__module__": module,
        "pk": models.CompositePrimaryKey(*keys),
        "vm": unchecked_vm(),
        **({device: models.PositiveSmallIntegerField()} if device else {}),
        time_column: models.DateTimeField(),
    }
    if rollup:
        attrs["n"] = models.PositiveIntegerField()
    for field, nullable, *_range in fields:
        for column in (f"{field}_avg", f"{field}_max") if rollup else (field,):
            attrs[column] = models.FloatField(null=nullable)
    if stamped:
        attrs["cluster_id"] = models.BigIntegerField(null=True)
    meta = {"app_label": "metrics", "indexes": [models.Index(fields=[time_column], name=index)]}

    def __str__(self):
        where = f"{self.vm_id}/{getattr(self, device)}" if device else f"{self.vm_id}"
        return f"{where} @ {getattr(self, time_column):{shown}}"

    return type(name, (models.Model,), attrs | {"Meta": type("Meta", (), meta), "__str__": __str__})


# What one VM measured at one instant, written by COPY and never updated. Its cluster is the
# VM's when the sample was written (None: in no cluster), taken from the VM row by the same
# statement: the cluster rollups count the sample for it, so membership changes never move
# history (metrics.models.cluster). On PostgreSQL its index is a BRIN (migration 0001):
# samples arrive in time order, so a few pages of summary answer "rows of the last minutes".
Sample = series_model(
    "Sample", "ts", METRIC_FIELDS, "metrics_sample_ts", module=__name__, stamped=True
)
# Per VM and minute or hour: how many samples, and each metric's avg and max.
MinuteRollup = series_model(
    "MinuteRollup",
    "bucket",
    METRIC_FIELDS,
    "metrics_minute_bucket",
    module=__name__,
    stamped=True,
    shown=MINUTES,
)
HourRollup = series_model(
    "HourRollup", "bucket", METRIC_FIELDS, "metrics_hour_bucket", module=__name__, shown=MINUTES
)


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
    # What the agent last said it is (its User-Agent), written only when it changes
    # (``metrics.agent_versions``); empty until an agent has reported one.
    agent_version = models.CharField(_("에이전트 버전"), max_length=32, blank=True, default="")
    # When the agent last called, by the portal's clock (``metrics.liveness``); None until
    # it has called with this token (a new one at each start of a guest).
    last_seen_at = models.DateTimeField(_("마지막 응답"), null=True, blank=True)

    class Meta:
        verbose_name = verbose_name_plural = _("메트릭 토큰")

    def __str__(self):
        return f"{self.vm_id}: {self.prefix}…"

    @property
    def portal_version(self) -> str:
        return PORTAL_VERSION

    @property
    def agent_differs(self) -> bool:
        """The agent reported a version other than the portal's: one left behind by an
        upgrade (a guest installs the portal's own build)."""
        return bool(self.agent_version) and self.agent_version != PORTAL_VERSION
