"""The simulator's samples: running VMs only, valid by the ingest rules, training-shaped."""

from datetime import timedelta

from django.utils import timezone

from clusters.backends.simulator import SimulatorBackend
from clusters.models import ClusterStatus
from metrics import ingest, simulate, tasks
from metrics.models import Sample
from vms.models import VmStatus


def test_running_vms_report_and_stopped_ones_do_not(world):
    cluster = world.cluster("sim", status=ClusterStatus.RUNNING)
    members = world.members(cluster, 2, status=VmStatus.RUNNING)
    loner = world.vm("loner", status=VmStatus.RUNNING)
    stopped = world.vm("stopped")
    now = timezone.now()
    assert simulate.emit_samples(now) == 3
    assert simulate.emit_samples(now) == 0  # the same instant again: nothing new, no error
    assert Sample.objects.count() == 3
    assert not Sample.objects.filter(vm=stopped).exists()
    for vm in members:
        s = Sample.objects.get(vm=vm)
        assert s.fabric_rx is not None and s.gpu_util is not None
    assert Sample.objects.get(vm=loner).fabric_rx is None  # no fabric outside a running cluster


def test_samples_pass_the_ingest_validation(world):
    vm = world.vm("sim", status=VmStatus.RUNNING)
    started = timezone.now() - timedelta(hours=1)
    now = timezone.now()
    batch = []
    for i in range(360):
        at = now - timedelta(seconds=10 * i)
        metrics = simulate.simulated_metrics(vm.pk, at, started, ClusterStatus.RUNNING, 8)
        batch.append({"ts": at.timestamp(), **metrics})
    _vm, columns, _devices = ingest.validate({"samples": batch}, now.timestamp())
    gpu = sorted(columns[3])
    assert gpu[len(gpu) // 2] > 80  # a training job: GPUs mostly busy
    assert gpu[0] < 30  # and checkpoint dips


def test_warm_up_ramps_from_idle(world):
    start = timezone.now()
    for seconds in range(0, 600, 10):  # in and out of checkpoints alike
        at = start + timedelta(seconds=seconds)
        just_started = simulate.simulated_metrics(7, at, at, ClusterStatus.RUNNING, 8)
        assert just_started["gpu_util"] == 0 and just_started["fabric_rx"] == 0


class AgentBackend(SimulatorBackend):
    """A backend whose VMs run the real agent: the portal must not invent their samples."""

    emits_metrics = False


class TracingSimulator(SimulatorBackend):
    """A simulator by another name (a test double, a subclass): still simulated VMs."""


def test_simulated_samples_only_where_the_backend_emits_them(world, settings):
    """The backend says so (``emits_metrics``); its dotted path's spelling does not matter."""
    world.vm("sim", status=VmStatus.RUNNING)
    settings.COMPUTE_BACKEND = f"{__name__}.AgentBackend"
    assert tasks.emit_simulated_samples() == 0
    settings.COMPUTE_BACKEND = f"{__name__}.TracingSimulator"
    assert tasks.emit_simulated_samples() == 1
    assert Sample.objects.count() == 1
