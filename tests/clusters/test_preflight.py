"""Each rule asked in one place: a preflight answers exactly what its action would raise,
changes nothing, and the pages that ask it stay within a fixed query budget; what a user may
not read does not leak through the header poll or the VM pages."""

import re
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters import progress, services
from clusters.models import ClusterStatus, VirtualCluster
from portal.celery import app
from portal.foundation.errors import RuleViolation
from portal.iam.permissions import Perm
from portal.models import Role, RoleBinding
from vms import services as vm_services
from vms.models import BillingType, VirtualMachine, VmStatus

HX = {"HTTP_HX_REQUEST": "true"}


def outcome(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except RuleViolation as refusal:
        return refusal.code
    return None


def snapshot():
    return (
        list(VirtualCluster.objects.order_by("pk").values_list("pk", "status", "generation")),
        list(VirtualMachine.objects.order_by("pk").values_list("pk", "status", "cluster_id")),
    )


CLUSTER_CASES = [
    # (cluster status, member statuses)
    (ClusterStatus.UNALLOCATED, []),
    (ClusterStatus.UNALLOCATED, [VmStatus.STOPPED]),
    (ClusterStatus.UNALLOCATED, [VmStatus.STOPPED, VmStatus.STOPPED]),
    (ClusterStatus.TERMINATED, [VmStatus.STOPPED, VmStatus.STOPPED, VmStatus.STOPPED]),
    (ClusterStatus.RUNNING, [VmStatus.STOPPED, VmStatus.STOPPED]),
    (ClusterStatus.RUNNING, [VmStatus.RUNNING, VmStatus.STOPPED]),
    (ClusterStatus.RUNNING, [VmStatus.ERROR, VmStatus.STOPPED]),
    (ClusterStatus.RUNNING, [VmStatus.STARTING, VmStatus.STOPPED]),
    (ClusterStatus.WAITING, [VmStatus.STOPPED, VmStatus.STOPPED]),
    (ClusterStatus.PROVISIONING, [VmStatus.STOPPED, VmStatus.STOPPED]),
    (ClusterStatus.DELETED, []),
]


@pytest.mark.parametrize("actor_name", ["admin", "operator", "viewer"])
@pytest.mark.parametrize(("status", "member_statuses"), CLUSTER_CASES)
@pytest.mark.parametrize(
    ("action", "preflight"),
    [
        (services.start_cluster, services.preflight_start),
        (services.stop_cluster, services.preflight_stop),
        (services.delete_cluster, services.preflight_delete),
    ],
    ids=["start", "stop", "delete"],
)
def test_cluster_preflight_answers_what_the_action_raises(
    world, actor_name, status, member_statuses, action, preflight
):
    world.capacity(100)
    cluster = world.cluster(status=status, previous_status=ClusterStatus.UNALLOCATED)
    for index, member_status in enumerate(member_statuses):
        world.vm(f"m{index}", cluster=cluster, status=member_status)
    actor = world.users[actor_name]
    before = snapshot()
    refusal = preflight(actor, cluster, services.MemberStates.read(cluster))
    assert snapshot() == before, "a preflight changed something"
    assert (refusal.code if refusal else None) == outcome(action, cluster.pk, actor=actor)


VM_CASES = [
    # (vm status, billing, dr, cluster status or None, vm in that cluster)
    (VmStatus.STOPPED, BillingType.ON_DEMAND, False, ClusterStatus.UNALLOCATED, False),
    (VmStatus.STOPPED, BillingType.SPOT, False, ClusterStatus.UNALLOCATED, False),
    (VmStatus.STOPPED, BillingType.RESERVED, True, ClusterStatus.RUNNING, False),
    (VmStatus.RUNNING, BillingType.ON_DEMAND, False, ClusterStatus.RUNNING, False),
    (VmStatus.STOPPED, BillingType.ON_DEMAND, False, ClusterStatus.WAITING, False),
    (VmStatus.STOPPED, BillingType.ON_DEMAND, False, ClusterStatus.RUNNING, True),
    (VmStatus.STOPPED, BillingType.ON_DEMAND, False, ClusterStatus.UNALLOCATED, True),
    (VmStatus.RUNNING, BillingType.ON_DEMAND, False, ClusterStatus.RUNNING, True),
    (VmStatus.ERROR, BillingType.ON_DEMAND, False, None, False),
    (VmStatus.STARTING, BillingType.ON_DEMAND, False, None, False),
]


@pytest.mark.parametrize("actor_name", ["admin", "viewer"])
@pytest.mark.parametrize(("status", "billing", "dr", "cluster_status", "member"), VM_CASES)
def test_vm_preflights_answer_what_the_actions_raise(
    world, actor_name, status, billing, dr, cluster_status, member
):
    world.capacity(100)
    actor = world.users[actor_name]
    cluster = world.cluster(status=cluster_status) if cluster_status else None
    if member:
        world.vm("other-member", cluster=cluster)  # a running cluster keeps 2 on detach
    vm = world.vm(
        "target",
        status=status,
        billing_type=billing,
        disaster_recovery=dr,
        cluster=cluster if member else None,
    )
    own = cluster if member else None
    before = snapshot()
    asked = {
        "start": vm_services.preflight_start(actor, vm, own),
        "stop": vm_services.preflight_stop(actor, vm),
        "delete": vm_services.preflight_delete(actor, vm),
    }
    if cluster is not None and not member:
        asked["attach"] = services.preflight_attach(actor, vm, cluster)
    if member:
        asked["detach"] = services.preflight_detach(
            actor, vm, cluster, services.MemberStates.read(cluster)
        )
    assert snapshot() == before, "a preflight changed something"
    for name, refusal in asked.items():
        fn = {
            "start": lambda: vm_services.start_vm(vm.pk, actor=actor),
            "stop": lambda: vm_services.stop_vm(vm.pk, actor=actor),
            "delete": lambda: vm_services.delete_vm(vm.pk, actor=actor),
            "attach": lambda: services.attach_vm(vm.pk, cluster.pk, actor=actor),
            "detach": lambda: services.detach_vm(vm.pk, actor=actor),
        }[name]
        # Each action from the same starting point: undo what a success did.
        state = snapshot()
        assert (refusal.code if refusal else None) == outcome(fn), name
        VirtualMachine.objects.filter(pk=vm.pk).update(
            status=status, cluster=cluster if member else None
        )
        assert snapshot() == state


def _header_queries(client, cluster):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"/clusters/{cluster.pk}/header/", {"seen": "x"}, **HX)
    assert response.status_code == 200
    return len(queries)


def test_header_poll_has_a_fixed_query_budget(world, login):
    """Failed before: the poll re-derived the rules in 3-4 membership queries, and 5 more
    when the cluster could stop and delete; now one read of the members' statuses (their
    names with them, for the stop dialog) and one of the operation running on it."""
    client = login("admin")
    small = world.cluster("small", status=ClusterStatus.RUNNING)
    world.members(small, 2, status=VmStatus.RUNNING)
    big = world.cluster("big", status=ClusterStatus.RUNNING)
    world.members(big, 60, status=VmStatus.STOPPED)
    _header_queries(client, small)  # warm the session and the role map
    assert _header_queries(client, small) == _header_queries(client, big) <= 7


def _only_role(world, name, permissions):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(name, password="x-pass-1234")
    role = Role.objects.create(name=name, permissions=permissions)
    RoleBinding.objects.create(user=user, project=world.demo, role=role)
    return user


def test_header_poll_does_not_leak_member_statuses_without_vm_read(world, client):
    """Failed before the fix: the header's ``seen`` fingerprint spelled out every member's
    status (``RUNNING:STARTING.STOPPED``) to a user with only cluster READ."""
    reader = _only_role(world, "cluster-reader", [Perm.CLUSTER_READ])
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    first, second = world.members(cluster, 2)
    VirtualMachine.objects.filter(pk=first.pk).update(status=VmStatus.STARTING)
    client.force_login(reader)
    page = client.get(f"/clusters/{cluster.pk}/header/", **HX).content.decode()
    assert "STARTING" not in page and "STOPPED" not in page
    seen = re.search(r'"seen": "([^"]+)"', page).group(1)
    VirtualMachine.objects.filter(pk=first.pk).update(status=VmStatus.RUNNING)
    again = client.get(f"/clusters/{cluster.pk}/header/", **HX).content.decode()
    assert re.search(r'"seen": "([^"]+)"', again).group(1) == seen, "a member's change shows"
    # Who may read the VMs is told that something changed (the tabs refresh), no more.
    client.force_login(world.admin)
    admin_seen = re.search(
        r'"seen": "([^"]+)"', client.get(f"/clusters/{cluster.pk}/header/", **HX).content.decode()
    ).group(1)
    VirtualMachine.objects.filter(pk=second.pk).update(status=VmStatus.STARTING)
    changed = client.get(f"/clusters/{cluster.pk}/header/", {"seen": admin_seen}, **HX)
    assert "cluster-changed" in changed.headers.get("HX-Trigger", "")
    assert "STARTING" not in changed.content.decode().split("hx-vals")[1].split(">")[0]


def test_vm_pages_hide_the_cluster_from_a_user_without_cluster_read(world, client):
    """Failed before the fix: /vms/ and /vms/<id>/ showed the cluster's name and status to a
    user who may read VMs but not clusters."""
    vm_reader = _only_role(world, "vm-reader", [Perm.VM_READ, Perm.VM_UPDATE])
    cluster = world.cluster("secret-cluster", status=ClusterStatus.RUNNING)
    vm, _other = world.members(cluster, 2, prefix="node-")
    client.force_login(vm_reader)
    for url in ("/vms/", f"/vms/{vm.pk}/"):
        page = client.get(url).content.decode()
        assert "secret-cluster" not in page, url
        assert "권한 없음" in page, url
        assert f"/clusters/{cluster.pk}/" not in page, url
    client.force_login(world.admin)
    assert "secret-cluster" in client.get(f"/vms/{vm.pk}/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_repair_leaves_a_step_another_process_is_advancing(world, monkeypatch):
    """Failed before the fix: a restarted worker running a queued start and the reconciler
    together rolled a healthy start back ("전환이 시간 내에 끝나지 않아 되돌렸습니다")."""
    from portal.compute.backends.simulator import SimulatorBackend

    world.capacity(10)
    cluster = world.cluster(status=ClusterStatus.UNALLOCATED)
    world.members(cluster, 2)
    # A start whose task a worker is about to run again (it was requeued when it died).
    VirtualCluster.objects.filter(pk=cluster.pk).update(
        status=ClusterStatus.PROVISIONING,
        previous_status=ClusterStatus.UNALLOCATED,
        operation="START",
        generation=1,
    )
    allocate = SimulatorBackend.allocate
    calls = []

    def allocate_while_the_worker_advances(self, cluster_obj, nodes):
        result = allocate(self, cluster_obj, nodes)
        if not calls:
            calls.append(1)

            # The restarted worker takes the same step first, and commits it (→ 할당됨).
            def worker():
                try:
                    progress.advance_cluster(cluster_obj.pk, 1)
                finally:
                    connection.close()

            thread = threading.Thread(target=worker)
            thread.start()
            thread.join(10)
        return result

    monkeypatch.setattr(SimulatorBackend, "allocate", allocate_while_the_worker_advances)
    # Queued steps wait for a worker (none here) instead of running inline.
    monkeypatch.setattr(app.conf, "task_always_eager", False)
    try:
        progress.repair_cluster(cluster.pk)
    finally:
        app.control.purge()
    cluster.refresh_from_db()
    assert cluster.last_error is None, cluster.last_error.message
    assert (
        cluster.status == ClusterStatus.ALLOCATED
    )  # the worker's step stands; it goes on from here
    while progress.advance_cluster(cluster.pk, 1):
        pass
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING
