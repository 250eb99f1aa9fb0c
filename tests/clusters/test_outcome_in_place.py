"""A failure is shown where the user acted, and progress counts as it goes (issue 41, items 1
and 2): a 클러스터 시작 rolled back for want of capacity is named with its reason in the
cluster header on every tab until 닫기 or the user's next action, and 활동 never calls it
성공; a bulk start counts each member the moment its VM settles, and every running
operation says what it is doing (never "0/0")."""

import re

import pytest
from django.urls import reverse
from django.utils import translation

from clusters import operations, outcome
from clusters.models import ClusterStatus, Operation, OperationItem
from clusters.operations import fanout
from vms import progress as vm_progress
from vms.models import VmStatus

Item = OperationItem.Status
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _korean():
    with translation.override("ko"):
        yield


def url(name, pk):
    return reverse(f"clusters:{name}", args=[pk])


def failed_start(world, capture, nodes=1):
    """A cluster of two whose 클러스터 시작 (by admin) is rolled back: ``nodes`` free."""
    world.capacity(nodes)
    cluster = world.cluster("short")
    world.members(cluster, 2)
    with capture(execute=True):
        operations.start_cluster_op(cluster.pk, actor=world.admin)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.UNALLOCATED
    return cluster


# -- 1. The failure in the header ------------------------------------------------------------


@pytest.mark.parametrize("tab", ["", "vms/", "metrics/", "activity/"])
def test_a_failed_start_is_named_with_its_reason_in_the_header_on_every_tab(
    world, login, django_capture_on_commit_callbacks, tab
):
    cluster = failed_start(world, django_capture_on_commit_callbacks)
    page = login("admin").get(f"/clusters/{cluster.pk}/{tab}").content.decode()
    assert 'id="header-outcome"' in page
    assert "클러스터 시작 실패" in page
    assert "요청 2노드, 가용 1노드" in page


def test_the_header_poll_shows_it_too_and_dismissing_hides_it_for_this_session(
    world, login, django_capture_on_commit_callbacks
):
    cluster = failed_start(world, django_capture_on_commit_callbacks)
    client = login("admin")
    header = client.get(url("cluster_header", cluster.pk), **HX).content.decode()
    assert "요청 2노드, 가용 1노드" in header
    operation = Operation.objects.get(cluster=cluster, kind=Operation.Kind.START_CLUSTER)
    dismissed = client.post(
        url("cluster_dismiss", cluster.pk), {"operation": operation.pk}, **HX
    ).content.decode()
    assert 'id="cluster-header"' in dismissed and 'id="header-outcome"' not in dismissed
    for path in (f"/clusters/{cluster.pk}/", url("cluster_header", cluster.pk)):
        assert 'id="header-outcome"' not in client.get(path).content.decode()


def test_dismissing_something_else_changes_nothing(
    world, login, django_capture_on_commit_callbacks
):
    cluster = failed_start(world, django_capture_on_commit_callbacks)
    client = login("admin")
    for value in ("", "abc", "999999"):
        client.post(url("cluster_dismiss", cluster.pk), {"operation": value}, **HX)
    assert 'id="header-outcome"' in client.get(f"/clusters/{cluster.pk}/").content.decode()


def test_acting_again_hides_the_old_failure(world, login, django_capture_on_commit_callbacks):
    cluster = failed_start(world, django_capture_on_commit_callbacks)
    client = login("admin")
    spare = world.vm("spare", zone=cluster.zone, instance_type=cluster.instance_type)
    operations.attach_many(cluster.pk, actor=world.admin, vm_ids=[spare.pk])
    assert 'id="header-outcome"' not in client.get(f"/clusters/{cluster.pk}/").content.decode()


def test_a_start_that_runs_shows_no_failure_and_another_users_failure_is_theirs(
    world, login, django_capture_on_commit_callbacks
):
    cluster = failed_start(world, django_capture_on_commit_callbacks)
    # operator did not act: the failure is admin's, said where admin acted.
    assert (
        'id="header-outcome"'
        not in login("operator").get(f"/clusters/{cluster.pk}/").content.decode()
    )
    world.capacity(2)
    with django_capture_on_commit_callbacks(execute=True):
        operations.start_cluster_op(cluster.pk, actor=world.admin)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING
    assert (
        'id="header-outcome"' not in login("admin").get(f"/clusters/{cluster.pk}/").content.decode()
    )


def test_activity_never_calls_a_failed_start_a_success(
    world, login, django_capture_on_commit_callbacks
):
    cluster = failed_start(world, django_capture_on_commit_callbacks)
    page = login("admin").get(f"/clusters/{cluster.pk}/activity/").content.decode()
    events = re.findall(r"<tr><td>.*?</tr>", page, re.S)
    rows = [row for row in events if "클러스터 시작" in row and ">admin<" in row]
    assert len(rows) == 1
    assert "outcome-failed" in rows[0] and "outcome-succeeded" not in rows[0]
    assert "시작하지 못했습니다" in rows[0] and "요청 2노드, 가용 1노드" in rows[0]


def test_each_start_in_activity_says_how_it_ended(world, django_capture_on_commit_callbacks):
    """Walked in order: failed, then 실행중, then one in flight."""
    cluster = failed_start(world, django_capture_on_commit_callbacks)
    world.capacity(2)
    with django_capture_on_commit_callbacks(execute=True):
        operations.start_cluster_op(cluster.pk, actor=world.admin)
    from portal.models import AuditEvent

    events = list(AuditEvent.objects.filter(cluster_id=cluster.pk).order_by("-at", "-id"))
    cluster.refresh_from_db()
    finals = outcome.start_finals(events, cluster)
    starts = [e for e in events if e.action == "cluster.start" and e.actor_id is not None]
    assert [finals[e.pk].state for e in starts] == [outcome.SUCCEEDED, outcome.FAILED]
    cluster.status = ClusterStatus.PROVISIONING  # as if a third start were in flight
    assert outcome.start_finals(starts[:1], cluster)[starts[0].pk].state == outcome.RUNNING


# -- 2. Progress counts as it goes -----------------------------------------------------------


def test_a_member_counts_the_moment_its_vm_settles_not_when_the_watcher_looks(
    world, monkeypatch, django_capture_on_commit_callbacks
):
    """The watcher never runs here (it would wait behind the members' steps on a busy
    worker): each VM's own step settles its item."""
    monkeypatch.setattr(fanout, "publish", lambda *args, **kwargs: None)
    cluster = world.cluster("c", status=ClusterStatus.RUNNING)
    members = world.members(cluster, 4)
    operation = operations.start_members(cluster.pk, actor=world.admin)
    fanout.run_items(operation.pk, [0, 1, 2, 3], then_watch=False)
    assert set(operation.items.values_list("status", flat=True)) == {Item.PENDING}
    counts = operation.items.aggregate(**outcome.item_counts())
    assert outcome.describe(operation, **counts).text == "진행 0/4"
    names = [vm.name for vm in members]
    assert outcome.doing(operation) == f"{names[0]}, {names[1]} 외 2대 시작 중"
    for done, vm in enumerate(members[:2], start=1):
        vm_progress.advance_vm(vm.pk)
        counts = operation.items.aggregate(**outcome.item_counts())
        assert outcome.describe(operation, **counts).text == f"진행 {done}/4"
    assert outcome.doing(operation) == f"{names[2]}, {names[3]} 시작 중"
    assert Operation.objects.get(pk=operation.pk).finished_at is None  # the watcher ends it


def test_an_item_settled_by_its_vm_is_not_settled_again_by_the_watcher(world, monkeypatch):
    monkeypatch.setattr(fanout, "publish", lambda *args, **kwargs: None)
    cluster = world.cluster("c", status=ClusterStatus.RUNNING)
    (vm,) = world.members(cluster, 1)
    operation = operations.start_members(cluster.pk, actor=world.admin)
    fanout.run_items(operation.pk, [0], then_watch=False)
    vm_progress.advance_vm(vm.pk)
    item = operation.items.get()
    assert item.status == Item.SUCCEEDED
    first = item.finished_at
    assert fanout.watch(operation.pk) is False
    item.refresh_from_db()
    assert item.finished_at == first
    operation.refresh_from_db()
    assert operation.done and outcome.describe(operation, 1, 1, 0).text == "성공 1/1"


def test_a_vm_that_fails_to_start_counts_as_failed_at_once(world, monkeypatch):
    from portal.compute.backends.simulator import SimulatorBackend
    from portal.foundation.errors import BackendError

    monkeypatch.setattr(fanout, "publish", lambda *args, **kwargs: None)
    cluster = world.cluster("c", status=ClusterStatus.RUNNING)
    (vm,) = world.members(cluster, 1)
    operation = operations.start_members(cluster.pk, actor=world.admin)
    fanout.run_items(operation.pk, [0], then_watch=False)

    def broken(self, vm, cluster=None):
        raise BackendError()

    monkeypatch.setattr(SimulatorBackend, "start_vm", broken)
    vm_progress.advance_vm(vm.pk)
    item = operation.items.get()
    assert item.status == Item.FAILED and item.error_code == "backend_error"
    counts = operation.items.aggregate(**outcome.item_counts())
    assert outcome.describe(operation, **counts).text == "진행 1/1 · 실패 1"


def test_a_cluster_start_says_its_step_never_0_of_0(world, login):
    cluster = world.cluster("c", status=ClusterStatus.PROVISIONING)
    world.members(cluster, 2)
    operation = Operation.objects.create(
        kind=Operation.Kind.START_CLUSTER, project=cluster.project, cluster=cluster
    )
    assert outcome.describe(operation, 0, 0, 0).text == "진행 중"
    assert outcome.doing(operation) == "자원 할당 중 (1/3단계)"
    header = login("admin").get(url("cluster_header", cluster.pk), **HX).content.decode()
    assert "0/0" not in header
    assert "클러스터 시작 진행 중" in header and "자원 할당 중 (1/3단계)" in header
    for status, words in (
        (ClusterStatus.ALLOCATED, "패브릭 구성 준비 중 (2/3단계)"),
        (ClusterStatus.WAITING, "패브릭 구성 중 (3/3단계)"),
    ):
        cluster.status = status
        cluster.save(update_fields=["status"])
        assert outcome.doing(operation) == words


def test_the_card_keeps_its_bar_and_line_when_done_and_names_what_it_does_while_running(
    world, login, monkeypatch
):
    monkeypatch.setattr(fanout, "publish", lambda *args, **kwargs: None)
    cluster = world.cluster("c", status=ClusterStatus.RUNNING)
    first, second = world.members(cluster, 2)
    operation = operations.start_members(cluster.pk, actor=world.admin)
    client = login("admin")
    card = client.get(url("operation_detail", operation.pk), **HX).content.decode()
    assert "진행 0/2" in card and "대기 2대" in card and "<progress" in card
    fanout.run_items(operation.pk, [0, 1], then_watch=False)
    card = client.get(url("operation_detail", operation.pk), **HX).content.decode()
    assert f"{first.name}, {second.name} 시작 중" in card
    for vm in cluster.members.all():
        vm_progress.advance_vm(vm.pk)
    fanout.watch(operation.pk)
    card = client.get(url("operation_detail", operation.pk), **HX).content.decode()
    assert "성공 2/2" in card and "<progress" in card and "에 끝남" in card


def test_a_replace_says_what_it_replaced(world):
    cluster = world.cluster("c", status=ClusterStatus.UNALLOCATED)
    member, _other = world.members(cluster, 2)
    spare = world.vm("spare", zone=cluster.zone, instance_type=cluster.instance_type)
    operation = operations.replace_member(cluster.pk, member.pk, spare.pk, actor=world.admin)
    operation.refresh_from_db()
    assert operation.done
    counts = operation.items.aggregate(**outcome.item_counts())
    assert outcome.describe(operation, **counts).text == f"교체 완료: {member.name} → spare"
    assert VmStatus.STOPPED == spare.status
