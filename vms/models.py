"""Virtual machines: what a project runs from the catalog (``portal.catalog``), alone or as
a cluster's members."""

from typing import Self, TypeVar

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from portal.catalog.models import instance_type_reference, zone_reference
from portal.foundation.errors import VmNotFound
from portal.foundation.event_text import render_message
from portal.foundation.kernel import Lifecycle, step
from portal.models import (
    LastErrorMixin,
    ProjectScopedQuerySet,
    project_reference,
    reference_to,
    user_reference,
)

# The links to what projects run from the catalog, wherever they are made (the models of
# the clusters app and of metrics link to VMs, a VM links to its cluster).
vm_reference = reference_to("vms.VirtualMachine", _("가상머신"))
cluster_reference = reference_to("clusters.VirtualCluster", _("클러스터"))


# A deleted cluster's or VM's status: the row stays (its history, its audit), nothing else.
DELETED = "DELETED"


def name_unique_per_project(constraint_name):
    """A name is unique in its project among the rows not deleted (a deleted one frees it)."""
    return models.UniqueConstraint(
        fields=["project", "name"],
        condition=~models.Q(status=DELETED),
        name=constraint_name,
    )


_M = TypeVar("_M", bound=models.Model)


class CatalogResourceQuerySet(ProjectScopedQuerySet[_M]):
    def alive(self) -> Self:
        """The clusters or VMs not deleted."""
        return self.exclude(status=DELETED)


class CatalogResource(LastErrorMixin, models.Model):
    """What a project runs from the catalog, a cluster or a VM: its zone and instance type,
    when its status last changed (moved by its ``lifecycle``), who made it and when."""

    zone = zone_reference(models.PROTECT)
    instance_type = instance_type_reference(models.PROTECT)
    status_changed_at = models.DateTimeField(_("상태 변경 시각"), default=timezone.now)
    created_by = user_reference(_("생성자"))
    created_at = models.DateTimeField(_("생성일"), auto_now_add=True)

    lifecycle: Lifecycle
    # Fields each concrete model declares (its own verbose names and lengths).
    name: str
    status: str

    class Meta:
        abstract = True

    def __str__(self):
        return self.name

    @property
    def is_transitional(self):
        return self.status in self.lifecycle.transitional


class VmStatus(models.TextChoices):
    STOPPED = "STOPPED", _("중지됨")
    STARTING = "STARTING", _("시작중")
    RUNNING = "RUNNING", _("실행중")
    STOPPING = "STOPPING", _("중지중")
    ERROR = "ERROR", _("오류")
    DELETED = "DELETED", _("삭제됨")


# A VM's lifecycle as one table; every status set below is read from it.
VM_LIFECYCLE = Lifecycle(
    VmStatus.values,
    step("start", {VmStatus.STOPPED}, VmStatus.STARTING),
    # ERROR: the backend failed to stop it; stopping again is the way out.
    step("stop", {VmStatus.RUNNING, VmStatus.ERROR}, VmStatus.STOPPING),
    step("delete", {VmStatus.STOPPED}, VmStatus.DELETED),
    step("started", {VmStatus.STARTING}, {VmStatus.RUNNING, VmStatus.STOPPED}, system=True),
    step("stopped", {VmStatus.STOPPING}, {VmStatus.STOPPED, VmStatus.ERROR}, system=True),
)
VM_TRANSITIONAL = VM_LIFECYCLE.transitional
VM_STARTABLE = VM_LIFECYCLE.sources("start")
VM_STOPPABLE = VM_LIFECYCLE.sources("stop")
# "Active" (docs/rules.md#vm-lifecycle): what a stop could act on, or a worker is moving.
# ERROR counts: it is set when the backend failed to stop the VM, so it may well still run.
VM_ACTIVE = VM_STOPPABLE | VM_TRANSITIONAL


class VmHealth(models.TextChoices):
    """How a VM is doing, apart from whether it runs (its power state, ``VmStatus``): moved
    only by ``vms.health.apply_health``, with the evidence that moved it."""

    OK = "OK", _("정상")
    SUSPECT = "SUSPECT", _("의심")
    CHECKING = "CHECKING", _("점검 중")
    ISOLATED = "ISOLATED", _("격리")
    REPLACING = "REPLACING", _("교체 중")


class BillingType(models.TextChoices):
    ON_DEMAND = "ON_DEMAND", _("온디맨드")
    RESERVED = "RESERVED", _("약정형")
    SPOT = "SPOT", _("스팟")


class VirtualMachineQuerySet(CatalogResourceQuerySet["VirtualMachine"]):
    """A deleted VM is gone: no lookup finds it, whoever asks."""

    not_found = VmNotFound

    def findable(self) -> Self:
        return self.alive()

    def is_findable(self, obj: "VirtualMachine") -> bool:
        return obj.status != VmStatus.DELETED


class VirtualMachine(CatalogResource):
    project = project_reference(models.PROTECT, "vms")
    name = models.CharField(_("이름"), max_length=63)
    billing_type = models.CharField(
        _("과금 유형"), max_length=10, choices=BillingType.choices, default=BillingType.ON_DEMAND
    )
    disaster_recovery = models.BooleanField(_("재해 복구"), default=False)
    status = models.CharField(
        _("상태"), max_length=10, choices=VmStatus.choices, default=VmStatus.STOPPED
    )
    cluster = cluster_reference(models.PROTECT, "members", null=True, blank=True)
    private_ip = models.GenericIPAddressField(_("사설 IP"), null=True, blank=True)
    # The member's place in its cluster (torchrun's --node_rank, the hostfile's order): the
    # lowest free rank at attach, cleared at detach; a 교체 spare inherits the replaced one's.
    node_rank = models.PositiveSmallIntegerField(_("노드 순위"), null=True, blank=True)
    # Fabric address, set once the VM joins its running cluster's fabric.
    fabric_guid = models.CharField(_("포트 GUID"), max_length=23, blank=True)
    fabric_lid = models.PositiveIntegerField(_("LID"), null=True, blank=True)
    fabric_ip = models.GenericIPAddressField(_("패브릭 IP"), null=True, blank=True)
    fabric_gid_index = models.PositiveSmallIntegerField(_("GID 인덱스"), null=True, blank=True)
    # Its health (``vms.health``): the state, when it last changed (None: never) and the
    # evidence that set it, a notice code of ``portal.foundation.event_text`` and its params.
    health = models.CharField(
        _("건강 상태"), max_length=10, choices=VmHealth.choices, default=VmHealth.OK
    )
    health_changed_at = models.DateTimeField(_("건강 상태 변경 시각"), null=True, blank=True)
    health_code = models.CharField(_("건강 상태 근거 코드"), max_length=40, blank=True)
    health_params = models.JSONField(_("건강 상태 근거 인자"), default=dict, blank=True)
    # The project's public keys its seed installs for the guest's login user, chosen at create.
    ssh_keys = models.ManyToManyField(
        "portal.SshKey", blank=True, related_name="vms", verbose_name=_("SSH 키")
    )

    objects = VirtualMachineQuerySet.as_manager()
    lifecycle = VM_LIFECYCLE

    class Meta:
        ordering = ["name", "id"]
        verbose_name = verbose_name_plural = _("가상머신")
        constraints = [name_unique_per_project("vm_name_unique_per_project")]
        indexes = [models.Index(fields=["status", "status_changed_at"])]

    @property
    def health_evidence(self) -> str:
        """What set its health, in the reader's language; "" while nothing has."""
        return render_message(self.health_code, self.health_params) if self.health_code else ""

    @property
    def health_headline(self) -> str:
        """``health_evidence`` without its details (a 불량 verdict's reasons): what a row of
        members has room for; the 검증 column and the VM page say the rest."""
        if not self.health_code:
            return ""
        return render_message(self.health_code, self.health_params, details=False)

    @property
    def fabric_address(self):
        if self.fabric_guid:
            ip = f" / {self.fabric_ip}" if self.fabric_ip else ""
            return f"GUID {self.fabric_guid} / LID {self.fabric_lid}{ip}"
        if self.fabric_ip:
            return f"{self.fabric_ip} / GID {self.fabric_gid_index}"
        return ""


class HostKey(models.Model):
    """One of a guest's SSH host keys as its agent read it (``/etc/ssh/ssh_host_*_key.pub``),
    so a user can check the first connection and members can trust each other's hosts
    (``clusters.peers``). Replaced whole at each report (``vms.host_keys``)."""

    vm = vm_reference(models.CASCADE, "host_keys")
    key_type = models.CharField(_("키 유형"), max_length=40)
    public_key = models.TextField(_("공개 키"))  # ``type base64``, no comment
    fingerprint = models.CharField(_("지문"), max_length=60)  # as ``ssh-keygen -l`` prints it
    reported_at = models.DateTimeField(_("보고 시각"))

    class Meta:
        ordering = ["vm", "key_type"]
        verbose_name = verbose_name_plural = _("호스트 키")
        constraints = [
            models.UniqueConstraint(fields=["vm", "key_type"], name="host_key_one_per_type")
        ]

    def __str__(self) -> str:
        return f"{self.vm_id}: {self.fingerprint}"
