"""취소 of a running 교체 or 검증 (docs/rules.md#cancelling): the cluster as it was, never
half-swapped; who may, and what may not be cancelled."""

import pytest

from clusters import operations, spares
from clusters.models import ClusterSpare, Operation
from clusters.models.validation import ValidationJob
from portal.foundation import errors
from portal.models import AuditEvent
from tests.validation.test_run import NODES, running_cluster
from vms.models import VirtualMachine, VmHealth, VmStatus


@pytest.fixture
def cluster(world):
    return running_cluster(world, NODES)


def test_a_replace_cancelled_while_its_member_stops_puts_the_member_back(
    world, cluster, django_capture_on_commit_callbacks
):
    member = VirtualMachine.objects.get(name="gpu-node-03")
    kept = world.vm("kept-01", private_ip="10.0.1.1")
    spares.add_spare(cluster.pk, kept.pk, actor=world.admin)
    with django_capture_on_commit_callbacks() as queued:
        operation = operations.replace_member(cluster.pk, member.pk, actor=world.admin)
    assert VirtualMachine.objects.get(pk=member.pk).status == VmStatus.STOPPING
    with django_capture_on_commit_callbacks(execute=True):
        operations.cancel_operation(operation.pk, actor=world.users["operator"])
        for callback in queued:
            callback()
    operation.refresh_from_db()
    assert operation.done and operation.error_code == "operation_cancelled"
    member.refresh_from_db()
    assert member.cluster_id == cluster.pk and member.node_rank == 2
    assert member.status == VmStatus.RUNNING and member.health == VmHealth.OK
    assert ClusterSpare.objects.filter(vm=kept).exists()  # still a spare, never joined
    assert VirtualMachine.objects.get(pk=kept.pk).cluster_id is None
    event = AuditEvent.objects.get(action="operation.cancel")
    assert event.outcome == AuditEvent.Outcome.SUCCEEDED


def test_a_validation_cancelled_records_no_verdict_and_puts_checked_members_back(
    world, cluster, django_capture_on_commit_callbacks
):
    suspect = VirtualMachine.objects.get(name="gpu-node-02")
    VirtualMachine.objects.filter(pk=suspect.pk).update(health=VmHealth.SUSPECT)
    with django_capture_on_commit_callbacks():  # the agents never answer
        operation = operations.start_validation(cluster.pk, actor=world.admin, focus=suspect.pk)
    assert VirtualMachine.objects.get(pk=suspect.pk).health == VmHealth.CHECKING
    operations.cancel_operation(operation.pk, actor=world.admin)
    operation.refresh_from_db()
    assert operation.done and operation.error_code == "operation_cancelled"
    assert not operation.validation.verdicts.exists()
    assert not ValidationJob.objects.filter(
        run=operation.validation, status__in=["PENDING", "RUNNING"]
    ).exists()
    assert VirtualMachine.objects.get(pk=suspect.pk).health == VmHealth.SUSPECT
    operations.start_validation(cluster.pk, actor=world.admin)  # no run left open


def test_what_may_not_be_cancelled_and_by_whom(world, cluster):
    operation = operations.start_validation(cluster.pk, actor=world.admin)
    with pytest.raises(errors.PermissionRequired):
        operations.cancel_operation(operation.pk, actor=world.users["viewer"])
    with pytest.raises(errors.NotFound):
        operations.cancel_operation(operation.pk, actor=world.users["other"])
    operations.cancel_operation(operation.pk, actor=world.admin)
    with pytest.raises(errors.NotCancellable):
        operations.cancel_operation(operation.pk, actor=world.admin)
    attach = operations.attach_many(cluster.pk, [world.vm("loose").pk], actor=world.admin)
    with pytest.raises(errors.NotCancellable):
        operations.cancel_operation(attach.pk, actor=world.admin)
    stopped = world.cluster("stopped")
    a, b = world.members(stopped, 2)
    done = operations.replace_member(stopped.pk, a.pk, world.vm("s").pk, actor=world.admin)
    with pytest.raises(errors.NotCancellable):
        operations.cancel_operation(done.pk, actor=world.admin)
    assert Operation.objects.get(pk=done.pk).error_code == ""


def test_the_card_of_an_automatic_replace_names_the_policy_and_offers_cancel(
    world, cluster, login, django_capture_on_commit_callbacks
):
    from django.urls import reverse

    from clusters import policy
    from vms import health

    policy.set_policy(cluster.pk, actor=world.admin, policy="auto")
    spares.add_spare(cluster.pk, world.vm("kept-01", private_ip="10.0.1.1").pk, actor=world.admin)
    with django_capture_on_commit_callbacks(execute=True):
        health.straggler(VirtualMachine.objects.get(name="gpu-node-03").pk, "GPU 5", 20.0, 5)
    replace = Operation.objects.get(kind=Operation.Kind.REPLACE)
    card = login("admin").get(reverse("clusters:operation_detail", args=[replace.pk])).text
    assert "자동 교체 정책(admin," in card and "근거: gpu-node-03" in card
    open_run = operations.start_validation(cluster.pk, actor=world.admin)
    url = reverse("clusters:operation_detail", args=[open_run.pk])
    assert f'id="op-cancel-{open_run.pk}"' in login("admin").get(url).text
    viewer = login("viewer").get(url).text
    assert "권한 없음: Resource.VirtualCluster.UPDATE" in viewer
    cancelled = login("admin").post(
        reverse("clusters:operation_cancel", args=[open_run.pk]), headers={"HX-Request": "true"}
    )
    assert cancelled.status_code == 200 and "사용자가 작업을 취소했습니다" in cancelled.text
