"""Every rule of docs/rules.md at service level, with its exact Korean message."""

import pytest
from django.utils import translation

from clusters import progress, services
from clusters.models import ClusterStatus, VirtualCluster
from portal.catalog.models import FabricType
from portal.compute.backends.simulator import SimulatorBackend
from portal.compute.models import SimulatorAllocation
from portal.foundation import errors
from portal.models import AuditEvent
from vms import services as vm_services
from vms.models import BillingType, VmStatus


@pytest.fixture(autouse=True)
def korean():
    with translation.override("ko"):
        yield


def refused(exc_type, message, fn, *args, **kwargs):
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert str(info.value.message) == message
    return info.value


def run_tasks(django_capture_on_commit_callbacks, fn, *args, **kwargs):
    """Run a service and then the Celery tasks it queued (eager), as a worker would."""
    with django_capture_on_commit_callbacks(execute=True):
        return fn(*args, **kwargs)


# -- Rule 1: only a stopped VM of the same zone and instance type -----------------------------

RULE1 = "동일한 인스턴스 타입이며 중지된 상태의 가상머신만 연결할 수 있습니다"


@pytest.mark.parametrize(
    "change",
    [
        {"status": VmStatus.RUNNING},
        {"status": VmStatus.STARTING},
        {"zone": "zone_b"},
        {"instance_type": "l40s"},
    ],
    ids=["running", "starting", "other-zone", "other-type"],
)
def test_attach_refuses_vm_not_stopped_or_of_another_zone_or_type(world, change):
    cluster = world.cluster()
    change = {
        k: getattr(world, v) if isinstance(v, str) and hasattr(world, v) else v
        for k, v in change.items()
    }
    vm = world.vm("n1", **change)
    # A refusal of another zone or type names it; the rest is rule 1's own words.
    message = {
        "zone": "다른 가용 영역(kr-central-1b)의 가상머신은 이 클러스터에 연결할 수 없습니다",
        "instance_type": (
            "다른 인스턴스 유형(gpu.l40sx4)의 가상머신은 이 클러스터에 연결할 수 없습니다"
        ),
    }.get(next(iter(change)), RULE1)
    refused(errors.VmNotEligible, message, services.attach_vm, vm.pk, cluster.pk, actor=world.admin)
    vm.refresh_from_db()
    assert vm.cluster_id is None


def test_attach_accepts_stopped_on_demand_and_reserved_vms(world):
    cluster = world.cluster()
    a = world.vm("a")
    b = world.vm("b", billing_type=BillingType.RESERVED)
    services.attach_vm(a.pk, cluster.pk, actor=world.admin)
    services.attach_vm(b.pk, cluster.pk, actor=world.admin)
    assert set(cluster.members.values_list("name", flat=True)) == {"a", "b"}
    assert AuditEvent.objects.filter(action="vm.attach", outcome="SUCCEEDED").count() == 2


def test_attach_refuses_vm_of_another_project_as_not_found(world):
    cluster = world.cluster()
    foreign = world.vm("foreign", project=world.other)
    with pytest.raises(errors.NotFound):
        services.attach_vm(foreign.pk, cluster.pk, actor=world.admin)
    # Even a superuser cannot join projects together.
    world.admin.is_superuser = True
    with pytest.raises(errors.NotFound):
        services.attach_vm(foreign.pk, cluster.pk, actor=world.admin)


# -- Rule 2: spot and DR VMs are refused ------------------------------------------------------

RULE2 = "스팟·재해 복구(DR) 가상머신은 클러스터에 연결할 수 없습니다"


@pytest.mark.parametrize(
    "kw", [{"billing_type": BillingType.SPOT}, {"disaster_recovery": True}], ids=["spot", "dr"]
)
def test_attach_refuses_spot_and_dr(world, kw):
    cluster = world.cluster()
    vm = world.vm("special", **kw)
    refused(errors.SpotOrDrVm, RULE2, services.attach_vm, vm.pk, cluster.pk, actor=world.admin)
    event = AuditEvent.objects.get(action="vm.attach")
    assert event.outcome == "REFUSED" and event.code == "spot_or_dr_vm" and event.text == RULE2


# -- Rule 3: one cluster at most; membership only in 미할당/실행중/종료됨 ----------------

RULE3 = "클러스터 상태가 변경되는 중에는 가상머신을 연결하거나 분리할 수 없습니다"


def test_vm_belongs_to_at_most_one_cluster(world):
    first, second = world.cluster("first"), world.cluster("second")
    vm = world.vm("n1")
    services.attach_vm(vm.pk, first.pk, actor=world.admin)
    refused(
        errors.AlreadyMember,
        "이미 다른 클러스터에 연결된 가상머신입니다",
        services.attach_vm,
        vm.pk,
        second.pk,
        actor=world.admin,
    )
    vm.refresh_from_db()
    assert vm.cluster_id == first.pk


@pytest.mark.parametrize(
    "status", [ClusterStatus.PROVISIONING, ClusterStatus.ALLOCATED, ClusterStatus.WAITING]
)
def test_attach_and_detach_refused_while_cluster_changes(world, status):
    cluster = world.cluster(status=status)
    member = world.members(cluster, 2)[0]
    vm = world.vm("n1")
    refused(errors.ClusterChanging, RULE3, services.attach_vm, vm.pk, cluster.pk, actor=world.admin)
    refused(errors.ClusterChanging, RULE3, services.detach_vm, member.pk, actor=world.admin)


@pytest.mark.parametrize(
    "status", [ClusterStatus.UNALLOCATED, ClusterStatus.RUNNING, ClusterStatus.TERMINATED]
)
def test_attach_allowed_in_stable_statuses(world, status):
    cluster = world.cluster(status=status)
    world.members(cluster, 2)
    vm = world.vm("n1")
    services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    assert cluster.members.count() == 3


def test_attach_to_deleted_cluster_is_not_found(world):
    cluster = world.cluster(status=ClusterStatus.DELETED)
    vm = world.vm("n1")
    with pytest.raises(errors.NotFound):
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)


def test_detach_only_a_stopped_vm(world):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    members = world.members(cluster, 3)
    members[0].status = VmStatus.RUNNING
    members[0].save()
    refused(
        errors.VmNotStopped,
        "중지된 가상머신만 분리하거나 삭제할 수 있습니다",
        services.detach_vm,
        members[0].pk,
        actor=world.admin,
    )


def test_detach_from_running_cluster_keeps_two_members(world):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    a, b, c = world.members(cluster, 3)
    services.detach_vm(a.pk, actor=world.admin)
    refused(
        errors.NotEnoughMembers,
        "가상머신 2대 이상이 필요합니다",
        services.detach_vm,
        b.pk,
        actor=world.admin,
    )
    assert cluster.members.count() == 2


def test_detach_from_unallocated_cluster_may_empty_it(world):
    cluster = world.cluster()
    a, b = world.members(cluster, 2)
    services.detach_vm(a.pk, actor=world.admin)
    services.detach_vm(b.pk, actor=world.admin)
    assert cluster.members.count() == 0
    refused(
        errors.NotMember,
        "클러스터에 연결되지 않은 가상머신입니다",
        services.detach_vm,
        a.pk,
        actor=world.admin,
    )


# -- Rule 4: start needs 2+ members -----------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1])
def test_start_needs_two_members(world, count):
    cluster = world.cluster()
    world.members(cluster, count)
    refused(
        errors.NotEnoughMembers,
        "가상머신 2대 이상이 필요합니다",
        services.start_cluster,
        cluster.pk,
        actor=world.admin,
    )
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.UNALLOCATED


def test_start_walks_to_running_and_assigns_fabric_addresses(
    world, django_capture_on_commit_callbacks
):
    cluster = world.cluster()
    a, b = world.members(cluster, 2)
    run_tasks(
        django_capture_on_commit_callbacks, services.start_cluster, cluster.pk, actor=world.admin
    )
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING
    a.refresh_from_db()
    b.refresh_from_db()
    assert a.fabric_guid and b.fabric_guid and a.fabric_lid != b.fabric_lid
    steps = list(
        AuditEvent.objects.filter(cluster_id=cluster.pk)
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert steps == ["cluster.start", "cluster.allocated", "cluster.waiting", "cluster.running"]


def test_roce_cluster_gets_ip_and_gid(world, django_capture_on_commit_callbacks):
    cluster = world.cluster(fabric_type=FabricType.ROCE_V2)
    a, _b = world.members(cluster, 2)
    run_tasks(
        django_capture_on_commit_callbacks, services.start_cluster, cluster.pk, actor=world.admin
    )
    a.refresh_from_db()
    assert a.fabric_ip and a.fabric_gid_index == 3 and not a.fabric_guid


def test_double_start_is_refused(world):
    cluster = world.cluster()
    world.members(cluster, 2)
    services.start_cluster(cluster.pk, actor=world.admin)
    refused(
        errors.InvalidTransition,
        "현재 상태에서는 이 작업을 할 수 없습니다",
        services.start_cluster,
        cluster.pk,
        actor=world.admin,
    )
    cluster.refresh_from_db()
    assert cluster.generation == 1


# -- Rule 5: stop refused while a member runs -------------------------------------------------

RULE5 = "실행 중인 가상머신이 있으면 먼저 모든 가상머신을 종료해야 합니다"


@pytest.mark.parametrize(
    "vm_status", [VmStatus.RUNNING, VmStatus.STARTING, VmStatus.STOPPING, VmStatus.ERROR]
)
def test_stop_refused_while_member_running_or_changing(world, vm_status):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    a, _b = world.members(cluster, 2)
    a.status = vm_status
    a.save()
    refused(errors.MembersStillRunning, RULE5, services.stop_cluster, cluster.pk, actor=world.admin)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING


def test_stop_releases_the_fabric(world, django_capture_on_commit_callbacks):
    cluster = world.cluster()
    world.members(cluster, 2)
    run_tasks(
        django_capture_on_commit_callbacks, services.start_cluster, cluster.pk, actor=world.admin
    )
    assert SimulatorAllocation.objects.filter(cluster_id=cluster.pk).exists()
    run_tasks(
        django_capture_on_commit_callbacks, services.stop_cluster, cluster.pk, actor=world.admin
    )
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.TERMINATED
    assert not SimulatorAllocation.objects.filter(cluster_id=cluster.pk).exists()
    assert not cluster.members.exclude(fabric_guid="").exists()


def test_stop_during_waiting_stands_the_start_down(world, django_capture_on_commit_callbacks):
    cluster = world.cluster()
    world.members(cluster, 2)
    services.start_cluster(cluster.pk, actor=world.admin)  # queued task not run: still 준비중
    progress.advance_cluster(cluster.pk)  # -> ALLOCATED
    progress.advance_cluster(cluster.pk)  # -> WAITING
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.WAITING
    run_tasks(
        django_capture_on_commit_callbacks, services.stop_cluster, cluster.pk, actor=world.admin
    )
    # The start's next step finds the cluster stopped and does nothing but make sure of release.
    assert progress.advance_cluster(cluster.pk) is False
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.TERMINATED
    assert not SimulatorAllocation.objects.filter(cluster_id=cluster.pk).exists()


def test_stop_refused_when_not_running(world):
    cluster = world.cluster()
    refused(
        errors.InvalidTransition,
        "현재 상태에서는 이 작업을 할 수 없습니다",
        services.stop_cluster,
        cluster.pk,
        actor=world.admin,
    )


# -- Rule 6: a member starts only while its cluster runs --------------------------------------

RULE6 = "클러스터가 실행중일 때만 멤버 가상머신을 시작할 수 있습니다"


@pytest.mark.parametrize(
    "status",
    [
        ClusterStatus.UNALLOCATED,
        ClusterStatus.PROVISIONING,
        ClusterStatus.WAITING,
        ClusterStatus.TERMINATED,
    ],
)
def test_member_start_needs_running_cluster(world, status):
    cluster = world.cluster(status=status)
    a, _b = world.members(cluster, 2)
    refused(errors.ClusterNotRunning, RULE6, vm_services.start_vm, a.pk, actor=world.admin)
    a.refresh_from_db()
    assert a.status == VmStatus.STOPPED


def test_member_and_free_vm_start(world, django_capture_on_commit_callbacks):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    a, _b = world.members(cluster, 2)
    free = world.vm("free")
    run_tasks(django_capture_on_commit_callbacks, vm_services.start_vm, a.pk, actor=world.admin)
    run_tasks(django_capture_on_commit_callbacks, vm_services.start_vm, free.pk, actor=world.admin)
    a.refresh_from_db()
    free.refresh_from_db()
    assert a.status == free.status == VmStatus.RUNNING
    assert a.fabric_guid and not free.fabric_guid


# -- Rule 7: zone, type, fabric fixed; the type must offer the fabric in the zone -------------


def test_create_refuses_fabric_not_offered(world):
    refused(
        errors.FabricNotOffered,
        "선택한 인스턴스 유형은 이 가용 영역에서 해당 패브릭을 지원하지 않습니다",
        services.create_cluster,
        **world.new_cluster("x", instance_type_id=world.l40s.pk),
    )
    assert not VirtualCluster.objects.exists()


def test_create_starts_empty_in_provisioning_then_unallocated(
    world, django_capture_on_commit_callbacks
):
    cluster = run_tasks(
        django_capture_on_commit_callbacks,
        services.create_cluster,
        **world.new_cluster("  학습-클러스터-1 "),
    )
    assert cluster.name == "학습-클러스터-1"
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.UNALLOCATED and cluster.members.count() == 0
    assert AuditEvent.objects.filter(action="cluster.provisioned", cluster_id=cluster.pk).exists()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "이름을 입력하세요."),
        ("   ", "이름을 입력하세요."),
        ("x" * 64, "이름은 63자 이하로 입력하세요."),
        ("<script>", "이름에는 영문, 숫자, 한글과 하이픈(-)만 쓸 수 있습니다."),
        ("a b", "이름에는 영문, 숫자, 한글과 하이픈(-)만 쓸 수 있습니다."),
        ("a\x00b", "이름에는 영문, 숫자, 한글과 하이픈(-)만 쓸 수 있습니다."),
    ],
)
def test_create_refuses_bad_names(world, name, message):
    refused(
        errors.InvalidInput,
        message,
        services.create_cluster,
        **world.new_cluster(name),
    )
    assert not VirtualCluster.objects.exists()
    assert AuditEvent.objects.get(action="cluster.create").outcome == "REFUSED"


def test_create_refuses_duplicate_name_but_allows_after_delete(world):
    train = world.new_cluster("train")
    first = world.cluster("train")
    refused(
        errors.NameTaken,
        "이 프로젝트에 같은 이름의 클러스터가 이미 있습니다",
        services.create_cluster,
        **train,
    )
    services.delete_cluster(first.pk, actor=world.admin)
    assert services.create_cluster(**train).name == "train"
    # Another project may use the same name.
    services.create_cluster(**{**train, "actor": world.users["other"], "project": world.other})


@pytest.mark.parametrize("bad", ["abc", "-1", "0", "99999999", None, "1.5", "9" * 40])
def test_unknown_ids_are_not_found(world, bad):
    with pytest.raises(errors.NotFound):
        services.start_cluster(bad, actor=world.admin)
    with pytest.raises(errors.NotFound):
        services.attach_vm(bad, bad, actor=world.admin)
    with pytest.raises(errors.InvalidInput):
        services.create_cluster(**world.new_cluster("ok", zone_id=bad))


# -- Permissions inside the services (docs/rules.md#permissions) -----------------------------


def test_services_check_permissions(world):
    cluster = world.cluster()
    a, _b = world.members(cluster, 2)
    viewer, operator = world.users["viewer"], world.users["operator"]
    refused(
        errors.PermissionRequired,
        "Resource.VirtualCluster.CREATE 권한이 필요합니다.",
        services.create_cluster,
        **world.new_cluster("x", actor=viewer),
    )
    refused(
        errors.PermissionRequired,
        "Resource.VirtualCluster.UPDATE 권한이 필요합니다.",
        services.start_cluster,
        cluster.pk,
        actor=viewer,
    )
    refused(
        errors.PermissionRequired,
        "Resource.VirtualCluster.DELETE 권한이 필요합니다.",
        services.delete_cluster,
        cluster.pk,
        actor=operator,
    )
    refused(
        errors.PermissionRequired,
        "Resource.VirtualMachine.UPDATE 권한이 필요합니다.",
        services.detach_vm,
        a.pk,
        actor=viewer,
    )
    with pytest.raises(errors.NotFound):
        services.start_cluster(cluster.pk, actor=world.users["other"])
    with pytest.raises(errors.NotFound):
        services.start_cluster(cluster.pk, actor=world.users["norole"])
    # The operator may start (UPDATE) but the attempt of the viewer was audited as refused.
    services.start_cluster(cluster.pk, actor=operator)
    assert AuditEvent.objects.filter(outcome="REFUSED").count() == 6


def test_english_messages_under_english(world):
    cluster = world.cluster()
    with translation.override("en"):
        with pytest.raises(errors.NotEnoughMembers) as info:
            services.start_cluster(cluster.pk, actor=world.admin)
        assert str(info.value.message) == "At least 2 virtual machines are required"


# -- Capacity and delete ------------------------------------------------------------------


def test_capacity_exhausted_keeps_previous_status(world, django_capture_on_commit_callbacks):
    world.capacity(1)
    cluster = world.cluster(status=ClusterStatus.TERMINATED)
    world.members(cluster, 2)
    run_tasks(
        django_capture_on_commit_callbacks, services.start_cluster, cluster.pk, actor=world.admin
    )
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.TERMINATED
    # It names what is short and which zone has room (the other zone's default capacity).
    assert cluster.last_error.message.startswith(
        "kr-central-1a의 H100 · InfiniBand 노드가 부족합니다: 요청 2노드, 가용 1노드. "
        "여유가 있는 영역: kr-central-1b("
    )
    assert not SimulatorAllocation.objects.filter(cluster_id=cluster.pk).exists()
    assert AuditEvent.objects.filter(action="cluster.start", outcome="FAILED").exists()


def test_fabric_failure_rolls_back_and_releases(world, django_capture_on_commit_callbacks):
    cluster = world.cluster()
    world.members(cluster, 2)
    SimulatorBackend.faults["configure_fabric"] = errors.BackendError
    run_tasks(
        django_capture_on_commit_callbacks, services.start_cluster, cluster.pk, actor=world.admin
    )
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.UNALLOCATED and cluster.last_error
    assert not SimulatorAllocation.objects.filter(cluster_id=cluster.pk).exists()
    assert not cluster.members.exclude(fabric_guid="").exists()


def test_delete_detaches_members_and_hides(world):
    cluster = world.cluster(status=ClusterStatus.TERMINATED)
    a, b = world.members(cluster, 2)
    services.delete_cluster(cluster.pk, actor=world.admin)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.DELETED
    a.refresh_from_db()
    assert a.cluster_id is None and a.status == VmStatus.STOPPED
    assert not VirtualCluster.objects.alive().filter(pk=cluster.pk).exists()


@pytest.mark.parametrize(
    "status", [ClusterStatus.RUNNING, ClusterStatus.PROVISIONING, ClusterStatus.WAITING]
)
def test_delete_refused_unless_unallocated_or_terminated(world, status):
    cluster = world.cluster(status=status)
    refused(
        errors.InvalidTransition,
        "현재 상태에서는 이 작업을 할 수 없습니다",
        services.delete_cluster,
        cluster.pk,
        actor=world.admin,
    )


# -- Reconciler ---------------------------------------------------------------------------


def test_reconciler_finishes_a_start_whose_task_was_lost(world, settings):
    settings.TRANSITION_TIMEOUT_SECONDS = 0
    cluster = world.cluster()
    world.members(cluster, 2)
    services.start_cluster(cluster.pk, actor=world.admin)  # the queued task never runs
    assert progress.reconcile() == [cluster.pk]
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING
    assert AuditEvent.objects.filter(action="cluster.reconcile", cluster_id=cluster.pk).exists()


def test_reconciler_rolls_back_when_the_backend_cannot_finish(world, settings):
    settings.TRANSITION_TIMEOUT_SECONDS = 0
    world.capacity(0)
    cluster = world.cluster()
    world.members(cluster, 2)
    services.start_cluster(cluster.pk, actor=world.admin)
    progress.reconcile()
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.UNALLOCATED and cluster.last_error


def test_reconciler_leaves_fresh_transitions_alone(world, settings):
    settings.TRANSITION_TIMEOUT_SECONDS = 3600
    cluster = world.cluster()
    world.members(cluster, 2)
    services.start_cluster(cluster.pk, actor=world.admin)
    assert progress.reconcile() == []
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.PROVISIONING


def test_reconciler_finishes_stuck_vms(world, settings):
    settings.TRANSITION_TIMEOUT_SECONDS = 0
    vm = world.vm("free")
    vm_services.start_vm(vm.pk, actor=world.admin)
    progress.reconcile()
    vm.refresh_from_db()
    assert vm.status == VmStatus.RUNNING


def test_duplicate_task_delivery_is_harmless(world, django_capture_on_commit_callbacks):
    cluster = world.cluster()
    world.members(cluster, 2)
    services.start_cluster(cluster.pk, actor=world.admin)
    generation = VirtualCluster.objects.get(pk=cluster.pk).generation
    for _ in range(6):  # the same message delivered many times
        progress.advance_cluster(cluster.pk, generation)
    progress.advance_cluster(cluster.pk, generation - 1)  # a stale one from an older start
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING
    assert AuditEvent.objects.filter(action="cluster.running").count() == 1


def test_rename_cluster_keeps_the_name_rules_and_audits(world):
    cluster = world.cluster("old-name")
    world.cluster("taken")
    services.rename_cluster(cluster.pk, actor=world.admin, name=" new-name ")
    cluster.refresh_from_db()
    assert cluster.name == "new-name"
    for name, error in (
        ("taken", errors.NameTaken),
        ("a b", errors.NameInvalid),
        ("", errors.NameRequired),
    ):
        with pytest.raises(error):
            services.rename_cluster(cluster.pk, actor=world.admin, name=name)
    with pytest.raises(errors.PermissionRequired):
        services.rename_cluster(cluster.pk, actor=world.users["viewer"], name="other-name")
    cluster.refresh_from_db()
    assert cluster.name == "new-name"
    assert AuditEvent.objects.get(action="cluster.update", outcome="SUCCEEDED").message == (
        "old-name → new-name"
    )
