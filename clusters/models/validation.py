"""클러스터 검증's records: the thresholds per instance type and fabric, a run
(one ``Operation`` of kind VALIDATE), the jobs its members' agents run, and the verdicts.

Imported by ``clusters.models`` (the app's models module); it names ``Operation`` by string
so that the two modules import one way only.
"""

from django.core.validators import MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from portal.catalog.models import FabricType, instance_type_reference
from vms.models import vm_reference


class Verdict(models.TextChoices):
    OK = "OK", _("정상")
    WARN = "WARN", _("점검 필요")
    BAD = "BAD", _("불량")
    NO_ANSWER = "NO_ANSWER", _("응답 없음")


# The straggler defaults, from the simulator's noise (docs/performance.md, bench_straggler).
STRAGGLER_GPU_POINTS = 10.0
STRAGGLER_PORT_PERCENT = 20.0
STRAGGLER_MINUTES = 5


def member_vm(related_name):
    """The member a record of a run is about. The record outlives the VM (the reference
    becomes None once the row is gone); its ``vm_name`` keeps what the member was called."""
    return vm_reference(models.SET_NULL, related_name, null=True)


class ValidationThreshold(models.Model):
    """What a member of (instance type, fabric) must reach. A missing row is made from
    ``clusters.validation.thresholds.DEFAULTS`` on first use, so the admin always shows the
    figures a run judged by."""

    instance_type = instance_type_reference(models.CASCADE, "+")
    fabric = models.CharField(_("패브릭 타입"), max_length=20, choices=FabricType.choices)
    ports = models.PositiveSmallIntegerField(
        _("패브릭 포트 수"), help_text=_("노드당 포트 수 (GPU마다 레일 하나: mlx5_0 … GPU 0 …).")
    )
    port_gbps = models.PositiveSmallIntegerField(_("포트 속도(Gb/s)"))
    intra_busbw_gbs = models.FloatField(
        _("노드 내 all-reduce busbw 기준(GB/s)"),
        help_text=_(
            "nccl-tests all_reduce_perf, 큰 메시지의 bus bandwidth. 8×H100/H200: 460 GB/s "
            "(Azure azurehpc-health-checks, conf/nd96isr_h100_v5.conf)."
        ),
    )
    multi_busbw_gbs = models.FloatField(
        _("노드 간 all-reduce busbw 기준(GB/s)"),
        help_text=_(
            "2노드 및 전체 노드 all_reduce_perf의 bus bandwidth. 8×H100/H200, 400 Gb/s 포트: "
            "440 GB/s (OCI oci-hpc 헬스 체크, 2노드). busbw는 노드 수와 무관하게 하드웨어 "
            "대역폭을 나타내도록 정규화되므로(nccl-tests PERFORMANCE.md) 전체 노드에도 같은 "
            "기준을 씁니다."
        ),
    )
    ib_write_bw_gbps = models.FloatField(
        _("ib_write_bw 기준(Gb/s, 포트당)"),
        help_text=_(
            "perftest ib_write_bw, 포트당. 400G: 375 Gb/s (Azure aznhc; OCI는 384 Gb/s), "
            "200G: 192 Gb/s (OCI)."
        ),
    )
    margin_percent = models.PositiveSmallIntegerField(
        _("점검 필요 범위(%)"),
        default=10,
        help_text=_("기준보다 이 비율 이내로 낮으면 점검 필요, 더 낮으면 불량입니다."),
    )
    # The 메트릭 tab's straggler (``metrics.storage.straggler.find_straggler``): a member is
    # named only when its gap to the cluster median stays past these for the sustained window.
    straggler_gpu_points = models.FloatField(
        _("느린 멤버: GPU 사용률 차이(%p)"),
        default=STRAGGLER_GPU_POINTS,
        help_text=_(
            "GPU 하나의 사용률이 클러스터 중앙값보다 이만큼 넘게 낮은 상태가 지속 시간 동안 "
            "이어지면 느린 멤버로 표시합니다."
        ),
    )
    straggler_port_percent = models.FloatField(
        _("느린 멤버: 패브릭 포트 처리량 차이(%)"),
        default=STRAGGLER_PORT_PERCENT,
        help_text=_(
            "패브릭 포트 하나의 처리량이 클러스터 중앙값보다 이 비율 넘게 낮은 상태가 지속 "
            "시간 동안 이어지면 느린 포트로 표시합니다."
        ),
    )
    straggler_minutes = models.PositiveSmallIntegerField(
        _("느린 멤버: 지속 시간(분)"),
        default=STRAGGLER_MINUTES,
        validators=[MinValueValidator(1)],
        help_text=_(
            "멤버가 보고한 마지막 이 시간(분) 동안 대부분 기준을 넘게 뒤처져야 느린 멤버입니다. "
            "방금 합류한 멤버는 이만큼 보고하기 전에는 판단하지 않습니다."
        ),
    )
    source = models.TextField(_("출처"), blank=True, help_text=_("이 행의 수치가 나온 곳."))
    # Not a column: an unsaved row made from the defaults says so (the help pages show it).
    is_default = False

    class Meta:
        verbose_name = verbose_name_plural = _("검증 기준")
        constraints = [
            models.UniqueConstraint(
                fields=["instance_type", "fabric"], name="one_threshold_per_type_fabric"
            )
        ]

    def __str__(self):
        return f"{self.instance_type} / {self.get_fabric_display()}"

    def snapshot(self) -> dict:
        """The figures a run judges by, kept with the run (a later edit changes no history)."""
        return {
            "ports": self.ports,
            "port_gbps": self.port_gbps,
            "intra_busbw_gbs": self.intra_busbw_gbs,
            "multi_busbw_gbs": self.multi_busbw_gbs,
            "ib_write_bw_gbps": self.ib_write_bw_gbps,
            "margin_percent": self.margin_percent,
        }


class ValidationRun(models.Model):
    """The VALIDATE operation's own facts: the diag level chosen, the thresholds used,
    which phase of jobs the members' agents may fetch now (``clusters.validation.plan``) and
    when the run ended (``finished_at``, what every reader of a run goes by)."""

    operation = models.OneToOneField(
        "clusters.Operation",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="validation",
        verbose_name=_("작업"),
    )
    level = models.PositiveSmallIntegerField(_("dcgmi diag 수준"), default=1)
    thresholds = models.JSONField(_("기준"), default=dict)
    phase = models.PositiveSmallIntegerField(_("단계"), default=0)
    phase_started_at = models.DateTimeField(_("단계 시작 시각"), null=True, blank=True)
    # The run's own end: the Operation's is set with it, but the operations' beat
    # (``fanout.watch_stale``) may close an Operation of a kind it does not know early.
    finished_at = models.DateTimeField(_("완료 시각"), null=True, blank=True)

    class Meta:
        verbose_name = verbose_name_plural = _("검증 실행")

    def __str__(self):
        return str(self.operation)


class ValidationJob(models.Model):
    """One tool run handed to one member's agent, and what came back."""

    class Kind(models.TextChoices):
        GPU = "gpu", _("GPU 진단")
        NCCL_LOCAL = "nccl_local", _("노드 내 all-reduce")
        IB_SERVER = "ib_server", _("ib_write_bw 서버")
        IB_CLIENT = "ib_client", _("ib_write_bw")
        NCCL_PAIR = "nccl_pair", _("2노드 all-reduce")
        NCCL_ALL = "nccl_all", _("전체 노드 all-reduce")

    class Status(models.TextChoices):
        PENDING = "PENDING", _("대기")
        RUNNING = "RUNNING", _("실행중")
        DONE = "DONE", _("완료")
        FAILED = "FAILED", _("실패")
        NO_ANSWER = "NO_ANSWER", _("응답 없음")
        # Not run: a member it needed had not answered (judged on that member alone).
        SKIPPED = "SKIPPED", _("건너뜀")

    run = models.ForeignKey(
        ValidationRun, on_delete=models.CASCADE, related_name="jobs", verbose_name=_("검증 실행")
    )
    vm = member_vm(related_name="+")
    vm_name = models.CharField(_("가상머신 이름"), max_length=63)
    # The other members the figure is about (the ib_write_bw server, the pair, all members).
    peers = models.JSONField(_("상대 멤버"), default=list)
    kind = models.CharField(_("종류"), max_length=12, choices=Kind.choices)
    phase = models.PositiveSmallIntegerField(_("단계"))
    params = models.JSONField(_("매개변수"), default=dict)
    timeout_seconds = models.PositiveIntegerField(_("제한 시간(초)"))
    status = models.CharField(
        _("상태"), max_length=10, choices=Status.choices, default=Status.PENDING
    )
    fetched_at = models.DateTimeField(_("가져간 시각"), null=True, blank=True)
    finished_at = models.DateTimeField(_("완료 시각"), null=True, blank=True)
    seconds = models.FloatField(_("소요 시간(초)"), null=True, blank=True)
    raw = models.JSONField(_("원본 출력"), default=list)
    figures = models.JSONField(_("수치"), default=dict)

    class Meta:
        ordering = ["run", "phase", "pk"]
        verbose_name = verbose_name_plural = _("검증 작업")
        indexes = [models.Index(fields=["vm", "status"])]

    def __str__(self):
        return f"{self.get_kind_display()} · {self.vm_name}"


class ValidationBaseline(models.Model):
    """A soft fabric's own measure (``clusters.validation.baseline``): each ring pair's
    ``ib_write_bw`` (client → server) and the all-reduce's bus bandwidth, from the first run
    after a start (``generation``) in which every member passed. Later runs of that start
    are judged against it; the next start records its own."""

    cluster = models.ForeignKey(
        "clusters.VirtualCluster",
        on_delete=models.CASCADE,
        related_name="validation_baselines",
        verbose_name=_("클러스터"),
    )
    generation = models.PositiveIntegerField(_("세대"))
    run = models.ForeignKey(
        ValidationRun,
        on_delete=models.SET_NULL,
        null=True,
        related_name="+",
        verbose_name=_("기록한 검증"),
    )
    # [{"client", "client_name", "server", "server_name", "device", "gbps"}]
    pairs = models.JSONField(_("링 쌍별 ib_write_bw"), default=list)
    allreduce_busbw_gbs = models.FloatField(_("all-reduce busbw(GB/s)"), null=True, blank=True)
    recorded_at = models.DateTimeField(_("기록 시각"))

    class Meta:
        verbose_name = verbose_name_plural = _("검증 기준선")
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "generation"], name="one_baseline_per_cluster_start"
            )
        ]

    def __str__(self):
        return f"{self.cluster_id}: {self.generation}"

    def snapshot(self) -> dict:
        """What a run keeps of it (a later start's baseline changes no history)."""
        return {
            "run": self.run_id,
            "recorded_at": self.recorded_at.isoformat(),
            "pairs": self.pairs,
            "allreduce_busbw_gbs": self.allreduce_busbw_gbs,
        }


class ValidationVerdict(models.Model):
    """A member's verdict in one run, with its reasons as (code, figures) pairs that
    ``clusters.validation.verdict.reason_text`` puts in words in the reader's language."""

    run = models.ForeignKey(
        ValidationRun,
        on_delete=models.CASCADE,
        related_name="verdicts",
        verbose_name=_("검증 실행"),
    )
    vm = member_vm(related_name="validation_verdicts")
    vm_name = models.CharField(_("가상머신 이름"), max_length=63)
    verdict = models.CharField(_("판정"), max_length=10, choices=Verdict.choices)
    reasons = models.JSONField(_("사유"), default=list)

    class Meta:
        ordering = ["run", "vm_name"]
        verbose_name = verbose_name_plural = _("검증 판정")
        indexes = [models.Index(fields=["vm", "-run"])]

    def __str__(self):
        return f"{self.vm_name}: {self.get_verdict_display()}"
