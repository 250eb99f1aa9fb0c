"""The simulator's samples: running VMs only, valid by the ingest rules, training-shaped."""

from datetime import timedelta

from django.utils import timezone

from clusters.models import ClusterStatus
from metrics import simulate, tasks
from metrics.ingest import batch as ingest
from metrics.models import Sample
from portal.compute.backends.simulator import SimulatorBackend
from vms.models import VirtualMachine, VmStatus


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


def test_each_gpu_and_port_is_stored_and_the_demo_straggler_is_slow(world):
    """gpu-node-03's GPU 5 runs at ~60% of its peers, its port 5 at half, every tick."""
    from statistics import median

    from metrics.models import GpuSample, PortSample

    cluster = world.cluster("sim-devices", status=ClusterStatus.RUNNING)
    members = world.members(cluster, 4, status=VmStatus.RUNNING, prefix="gpu-node-0")
    straggler = next(vm for vm in members if vm.name == "gpu-node-03")
    start = timezone.now() - timedelta(minutes=30)
    VirtualMachine.objects.filter(cluster=cluster).update(
        status_changed_at=start - timedelta(hours=1)
    )  # warmed up
    checked = 0
    for i in range(60):  # ten minutes: checkpoints included
        simulate.emit_samples(start + timedelta(seconds=10 * i))
    assert GpuSample.objects.count() == 60 * 4 * 8 and PortSample.objects.count() == 60 * 4 * 8
    for i in range(60):
        at = start + timedelta(seconds=10 * i)
        utils = {(r.vm_id, r.gpu): r.util for r in GpuSample.objects.filter(ts=at)}
        slow = utils.pop((straggler.pk, 5))
        peers = median(u for (vm_id, _gpu), u in utils.items() if vm_id == straggler.pk)
        if peers > 50:  # its node is not in a checkpoint dip
            checked += 1
            assert 0.5 < slow / peers < 0.7, (slow, peers)
        for vm in members:  # every other GPU keeps up with its own node
            own = [u for (vm_id, _gpu), u in utils.items() if vm_id == vm.pk]
            assert min(own) > 0.85 * median(own) or median(own) < 50  # noise in a dip
        rx = {(r.vm_id, r.port): r.rx for r in PortSample.objects.filter(ts=at)}
        slow_port = rx.pop((straggler.pk, 5))
        node_ports = [v for (vm_id, _port), v in rx.items() if vm_id == straggler.pk]
        if peers > 50:
            assert 0.4 < slow_port / median(node_ports) < 0.6
    assert checked > 40
    sample = Sample.objects.filter(vm=straggler).order_by("ts").last()
    own = GpuSample.objects.filter(vm=straggler, ts=sample.ts)
    assert abs(sample.gpu_util - sum(g.util for g in own) / 8) < 1e-6


def test_the_demo_seed_has_the_straggler_among_the_readme_cluster_nodes():
    from portal.management.commands.seed_demo import DEMO_VMS

    nodes = {name: spec for name, spec in DEMO_VMS.items() if name.startswith("gpu-node-")}
    assert simulate.STRAGGLER in nodes and len(set(nodes.values())) == 1  # attachable together
