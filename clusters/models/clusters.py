"""Virtual clusters and their lifecycle (docs/rules.md#cluster-lifecycle), operations, and the
simulator's capacity ledger."""

from collections import Counter
from dataclasses import dataclass, replace
from typing import Self

from django.core.exceptions import ObjectDoesNotExist
from django.db import models
from django.utils.translation import gettext_lazy as _

from portal.catalog.models import (
    FabricType,
)
from portal.foundation.errors import ClusterNotFound
from portal.foundation.kernel import Lifecycle, step
from portal.models import LastErrorMixin, ProjectScopedQuerySet, project_reference, user_reference
from portal.speed.statements import statements
from vms.models import (
    VM_ACTIVE,
    VM_TRANSITIONAL,
    CatalogResource,
    CatalogResourceQuerySet,
    VirtualMachine,
    VmStatus,
    cluster_reference,
    name_unique_per_project,
    vm_reference,
)


class ClusterStatus(models.TextChoices):
    PROVISIONING = "PROVISIONING", _("준비중")
    UNALLOCATED = "UNALLOCATED", _("미할당")
    ALLOCATED = "ALLOCATED", _("할당됨")
    WAITING = "WAITING", _("대기중")
    RUNNING = "RUNNING", _("실행중")
    TERMINATED = "TERMINATED", _("종료됨")
    DELETED = "DELETED", _("삭제됨")


# docs/rules.md#cluster-lifecycle as one table; every status set below is read from it.
LIFECYCLE = Lifecycle(
    ClusterStatus.values,
    step(
        "start", {ClusterStatus.UNALLOCATED, ClusterStatus.TERMINATED}, ClusterStatus.PROVISIONING
    ),
    step(
        "stop",
        {ClusterStatus.RUNNING, ClusterStatus.ALLOCATED, ClusterStatus.WAITING},
        ClusterStatus.TERMINATED,
    ),
    step("delete", {ClusterStatus.UNALLOCATED, ClusterStatus.TERMINATED}, ClusterStatus.DELETED),
    step("provisioned", {ClusterStatus.PROVISIONING}, ClusterStatus.UNALLOCATED, system=True),
    step("allocated", {ClusterStatus.PROVISIONING}, ClusterStatus.ALLOCATED, system=True),
    step("configuring", {ClusterStatus.ALLOCATED}, ClusterStatus.WAITING, system=True),
    step("running", {ClusterStatus.WAITING}, ClusterStatus.RUNNING, system=True),
    # A start that cannot finish goes back to where it came from (docs/rules.md#cluster-lifecycle).
    step(
        "roll_back",
        {ClusterStatus.PROVISIONING, ClusterStatus.ALLOCATED, ClusterStatus.WAITING},
        {ClusterStatus.UNALLOCATED, ClusterStatus.TERMINATED},
        system=True,
    ),
)
ALLOWED = LIFECYCLE.allowed
TRANSITIONAL = LIFECYCLE.transitional
STABLE = LIFECYCLE.stable
STARTABLE = LIFECYCLE.sources("start")
STOPPABLE = LIFECYCLE.sources("stop")
DELETABLE = LIFECYCLE.sources("delete")
# Membership may change only while the cluster is stable and not gone (``ClusterChanging``).
MEMBERSHIP_OPEN = STABLE - LIFECYCLE.terminal
# A stop would release these; a start is acquiring in the transitional ones.
HOLDS_RESOURCES = TRANSITIONAL | STOPPABLE
# A running cluster never has fewer (``NotEnoughMembers``).
MIN_MEMBERS = 2


@dataclass(frozen=True)
class MemberStates:
    """How many members a cluster has and in which states: what its rules need to know.

    ``digest`` is the members' statuses in id order, for telling that any of them changed.
    """

    count: int = 0
    active: int = 0  # running or in transition (a stop's ``MembersStillRunning``)
    transitional: int = 0
    digest: str = ""
    # The members not 중지됨, by name (``read`` only): what a stop with its members stops.
    unstopped: tuple[str, ...] = ()
    # Every member by name (``read`` only): what a delete detaches.
    names: tuple[str, ...] = ()

    @classmethod
    def of(cls, statuses) -> "MemberStates":
        statuses = list(statuses)
        return cls(
            count=len(statuses),
            active=sum(status in VM_ACTIVE for status in statuses),
            transitional=sum(status in VM_TRANSITIONAL for status in statuses),
            digest=".".join(statuses),
        )

    @classmethod
    def read(cls, cluster) -> "MemberStates":
        """One query, whatever the number of members (compiled once: the header's poll)."""
        return cls._of_rows(statements.rows(_member_states, None, cluster=cluster.pk))

    @classmethod
    def of_members(cls, vms) -> "MemberStates":
        """The same as ``read``, from the members a page has read already (no query)."""
        return cls._of_rows((vm.pk, vm.status, vm.name) for vm in vms)

    @classmethod
    def _of_rows(cls, rows) -> "MemberStates":
        rows = sorted(rows)
        unstopped = tuple(sorted(name for _pk, status, name in rows if status != VmStatus.STOPPED))
        names = tuple(sorted(name for _pk, _status, name in rows))
        return replace(
            cls.of(status for _pk, status, _name in rows), unstopped=unstopped, names=names
        )

    @property
    def by_status(self) -> Counter:
        """Members per status, from the statuses already read (no query)."""
        return Counter(self.digest.split(".")) if self.digest else Counter()


class ClusterOp(models.TextChoices):
    """What a cluster in a transitional status is doing (and so where a failure returns)."""

    NONE = "", "-"
    CREATE = "CREATE", _("생성")
    START = "START", _("시작")


def _member_states(_shape, cluster):
    members = VirtualMachine.objects.filter(cluster=cluster).order_by("pk")
    return members.values_list("pk", "status", "name")


class ReplacePolicy(models.TextChoices):
    """What a member judged 불량 leads to (docs/rules.md#a-clusters-policy)."""

    NOTIFY = "notify", _("알림만")
    PROPOSE = "propose", _("교체 제안")
    AUTO = "auto", _("자동 교체")


class VirtualClusterQuerySet(CatalogResourceQuerySet["VirtualCluster"]):
    not_found = ClusterNotFound


class VirtualCluster(CatalogResource):
    project = project_reference(models.PROTECT, "clusters")
    name = models.CharField(_("클러스터 이름"), max_length=63)
    fabric_type = models.CharField(_("패브릭 타입"), max_length=20, choices=FabricType.choices)
    status = models.CharField(
        _("상태"), max_length=14, choices=ClusterStatus.choices, default=ClusterStatus.PROVISIONING
    )
    # What the current transitional status is doing, and where to fall back if it fails.
    operation = models.CharField(_("작업"), max_length=10, choices=ClusterOp.choices, blank=True)
    previous_status = models.CharField(
        _("이전 상태"), max_length=14, choices=ClusterStatus.choices, blank=True
    )
    # Bumped by every start: a task of an older start finds a newer generation and stands down.
    generation = models.PositiveIntegerField(_("세대"), default=0)
    # The project's public keys every member's seed installs beside the member's own, chosen
    # at create and changed on the 정보 tab (docs/rules.md#ssh-keys). Not ``ssh_key``: that is
    # the cluster's own generated pair (``ClusterKey``), which members use between them.
    ssh_keys = models.ManyToManyField(
        "portal.SshKey", blank=True, related_name="clusters", verbose_name=_("SSH 키")
    )

    objects = VirtualClusterQuerySet.as_manager()
    lifecycle = LIFECYCLE

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = verbose_name_plural = _("가상 클러스터")
        constraints = [name_unique_per_project("cluster_name_unique_per_project")]
        indexes = [
            # The cluster list as it opens: a project's clusters, newest first. With the id
            # and the status in the index, a page (a deep OFFSET too, and the list's count)
            # is read from the index alone, prepared or not, never through the heap
            # (docs/performance.md, 2026-12-02).
            models.Index(
                fields=["project", "-created_at", "-id"], include=["status"], name="cluster_newest"
            ),
            # The list's total: a project's live clusters counted from an index of their
            # project ids alone, which PostgreSQL deduplicates into a few posting lists (20
            # pages at 10,000 clusters, where the name index it counted from has 72): 0.34
            # ms, not 0.58. The statement names the status it excludes, so its plan uses it.
            models.Index(
                fields=["project"],
                condition=~models.Q(status=ClusterStatus.DELETED),
                name="cluster_alive",
            ),
            models.Index(fields=["status", "status_changed_at"]),
        ]

    # Its 교체 정책 (``ClusterPolicy``, a row of its own: the cluster's table is not altered
    # for it), read as if it were the cluster's: 알림만 until someone sets another.
    def _policy_row(self) -> "ClusterPolicy | None":
        try:
            return self.policy_row
        except ObjectDoesNotExist:
            return None

    @property
    def policy(self) -> str:
        row = self._policy_row()
        return row.policy if row is not None else ReplacePolicy.NOTIFY

    @property
    def policy_set_by(self):
        row = self._policy_row()
        return row.set_by if row is not None else None

    @property
    def policy_set_at(self):
        row = self._policy_row()
        return row.set_at if row is not None else None

    @property
    def policy_set_by_name(self) -> str | None:
        """Who set the 교체 정책 (None: nobody has, or the account is gone)."""
        who = self.policy_set_by
        return who.get_username() if who is not None else None


class OperationQuerySet(ProjectScopedQuerySet["Operation"]):
    def open(self) -> Self:
        return self.filter(finished_at__isnull=True)


class Operation(LastErrorMixin, models.Model):
    """One user action over many targets (Yandex operations, OCI work requests): an item per
    VM, each run through the single-VM service, so every rule, permission and audit holds
    per item and one refusal never undoes the others. ``error`` is a failure of the whole
    (e.g. a name taken when creating many VMs); items carry their own."""

    class Kind(models.TextChoices):
        ATTACH = "attach", _("가상머신 연결")
        DETACH = "detach", _("가상머신 분리")
        START_MEMBERS = "start_members", _("멤버 시작")
        STOP_MEMBERS = "stop_members", _("멤버 중지")
        STOP_CLUSTER = "stop_cluster", _("클러스터 중지")
        CREATE_VMS = "create_vms", _("가상머신 생성")
        START_CLUSTER = "start_cluster", _("클러스터 시작")
        CREATE_CLUSTER = "create_cluster", _("클러스터 생성")
        DELETE_CLUSTER = "delete_cluster", _("클러스터 삭제")
        START_VM = "start_vm", _("가상머신 시작")
        STOP_VM = "stop_vm", _("가상머신 중지")
        DELETE_VM = "delete_vm", _("가상머신 삭제")
        UPDATE = "update", _("클러스터 이름 변경")
        SSH_KEYS = "ssh_keys", _("클러스터 SSH 키 변경")
        RENAME_VM = "rename_vm", _("가상머신 이름 변경")
        REPLACE = "replace", _("교체")
        VALIDATE = "validate", _("클러스터 검증")
        SPARE_ADD = "spare_add", _("예비 가상머신 추가")
        SPARE_REMOVE = "spare_remove", _("예비 가상머신 제외")
        POLICY = "policy", _("교체 정책 변경")

    project = project_reference(models.PROTECT, "operations")
    cluster = cluster_reference(models.SET_NULL, "operations", null=True, blank=True)
    actor = user_reference(_("수행자"))
    kind = models.CharField(_("종류"), max_length=20, choices=Kind.choices)
    created_at = models.DateTimeField(_("생성일"), auto_now_add=True)
    finished_at = models.DateTimeField(_("완료 시각"), null=True, blank=True)
    # The API's Idempotency-Key, the method and route it was sent to (a key is the caller's
    # in one project, on one route), and a hash of the request it came with (same key and
    # route, other target or body: refused).
    idempotency_key = models.CharField(_("멱등 키"), max_length=100, blank=True)
    idempotency_scope = models.CharField(_("멱등 키 범위"), max_length=200, blank=True)
    request_hash = models.CharField(_("요청 해시"), max_length=64, blank=True)
    # What started an automatic one (``clusters.policy``): the evidence (a health code and
    # its params, the 검증 run) and the policy it acted under, who set it and when.
    evidence = models.JSONField(_("근거"), default=dict, blank=True)

    objects = OperationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = verbose_name_plural = _("작업")
        indexes = [
            models.Index(fields=["cluster", "-created_at"]),
            models.Index(fields=["project", "-created_at"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["actor", "project", "idempotency_scope", "idempotency_key"],
                name="one_operation_per_scoped_idempotency_key",
                condition=~models.Q(idempotency_key=""),
            )
        ]

    def __str__(self):
        return f"{self.get_kind_display()} #{self.pk}"

    @property
    def done(self) -> bool:
        return self.finished_at is not None

    @property
    def kind_label(self) -> str:
        return self.get_kind_display()

    def _counts(self):
        if not hasattr(self, "_status_counts"):
            counts = dict.fromkeys(OperationItem.Status.values, 0)
            for status in self.items.values_list("status", flat=True):
                counts[status] += 1
            self._status_counts = counts
        return self._status_counts

    @property
    def total(self) -> int:
        return sum(self._counts().values())

    @property
    def finished(self) -> int:
        counts = self._counts()
        return counts[OperationItem.Status.SUCCEEDED] + counts[OperationItem.Status.FAILED]

    @property
    def failed(self) -> int:
        return self._counts()[OperationItem.Status.FAILED]


class OperationItem(LastErrorMixin, models.Model):
    """One target of an Operation and its own outcome (대기 / 성공 / 실패 + the message)."""

    class Status(models.TextChoices):
        PENDING = "PENDING", _("대기")
        SUCCEEDED = "SUCCEEDED", _("성공")
        FAILED = "FAILED", _("실패")

    operation = models.ForeignKey(
        Operation, on_delete=models.CASCADE, related_name="items", verbose_name=_("작업")
    )
    position = models.PositiveIntegerField(_("순서"))
    vm = vm_reference(models.SET_NULL, "operation_items", null=True, blank=True)
    target_name = models.CharField(_("대상 이름"), max_length=100, blank=True)
    status = models.CharField(
        _("상태"), max_length=10, choices=Status.choices, default=Status.PENDING
    )
    # When a worker ran the item's action (it then waits for its VM to settle).
    started_at = models.DateTimeField(_("시작 시각"), null=True, blank=True)
    finished_at = models.DateTimeField(_("완료 시각"), null=True, blank=True)

    class Meta:
        ordering = ["operation", "position"]
        verbose_name = verbose_name_plural = _("작업 항목")
        constraints = [
            models.UniqueConstraint(fields=["operation", "position"], name="one_item_per_position")
        ]
        indexes = [models.Index(fields=["vm", "status"])]

    def __str__(self):
        return f"{self.target_name}: {self.get_status_display()}"


class ClusterSpare(models.Model):
    """A stopped VM a cluster keeps in reserve (예비) for its 교체: held for it (nothing
    else starts, deletes or attaches it: ``clusters.holds``), never a member until a 교체
    makes it one (docs/rules.md#spares)."""

    cluster = models.ForeignKey(
        VirtualCluster, on_delete=models.CASCADE, related_name="spares", verbose_name=_("클러스터")
    )
    vm = models.OneToOneField(
        VirtualMachine,
        on_delete=models.CASCADE,
        related_name="spare_of",
        verbose_name=_("가상머신"),
    )
    added_by = user_reference(_("추가한 사용자"))
    added_at = models.DateTimeField(_("추가 시각"), auto_now_add=True)

    class Meta:
        ordering = ["cluster", "added_at", "id"]
        verbose_name = verbose_name_plural = _("예비 가상머신")

    def __str__(self):
        return f"{self.cluster_id}: {self.vm_id}"


class ClusterPolicy(models.Model):
    """A cluster's 교체 정책 (docs/rules.md#a-clusters-policy), who set it and when: the
    system acts under it in their name (``clusters.policy``). No row: 알림만."""

    cluster = models.OneToOneField(
        VirtualCluster,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="policy_row",
        verbose_name=_("클러스터"),
    )
    policy = models.CharField(
        _("교체 정책"), max_length=10, choices=ReplacePolicy.choices, default=ReplacePolicy.NOTIFY
    )
    set_by = user_reference(_("정책 설정자"))
    set_at = models.DateTimeField(_("정책 설정 시각"), auto_now=True)

    class Meta:
        verbose_name = verbose_name_plural = _("교체 정책")

    def __str__(self):
        return f"{self.cluster_id}: {self.policy}"
