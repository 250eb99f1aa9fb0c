"""The loop a 교체 정책 closes (docs/rules.md#a-clusters-policy), on the simulator with eager
tasks: a member made 의심 gets a targeted 검증 of itself and its ring neighbours; 불량
leads to the policy's action; a 교체 that took a 예비 checks the new member's links, and a
spare judged 불량 makes way for the next one."""

import pytest

from clusters import operations, policy, spares
from clusters.models import ClusterStatus, Operation, ValidationJob
from clusters.models.validation import Verdict
from clusters.operations import heal
from clusters.validation import agent_sim
from portal.models import AuditEvent
from tests.validation.test_run import NODES, running_cluster
from vms import health
from vms.models import VirtualMachine, VmHealth, VmStatus


@pytest.fixture
def cluster(world):
    # Private IPs for the spares too: the simulator's agents address their peers by them.
    return running_cluster(world, NODES)


def vm(name):
    return VirtualMachine.objects.get(name=name)


def suspect(name, run):
    """The straggler rule names ``name`` (its health 정상 → 의심), the loop runs."""
    with run(execute=True):
        health.straggler(vm(name).pk, "GPU 5", 20.0, 5)


def spare(world, cluster, name, ip):
    made = world.vm(name, private_ip=ip)
    spares.add_spare(cluster.pk, made.pk, actor=world.admin)
    return made


def validations(cluster):
    return Operation.objects.filter(cluster=cluster, kind=Operation.Kind.VALIDATE).order_by("pk")


def test_a_targeted_run_plans_only_the_member_its_neighbours_and_its_links(world, cluster):
    focus = vm("gpu-node-02")
    operation = operations.start_validation(cluster.pk, actor=world.admin, focus=focus.pk)
    items = list(operation.items.values_list("target_name", flat=True))
    assert items == ["gpu-node-01", "gpu-node-02", "gpu-node-03"]
    jobs = ValidationJob.objects.filter(run__operation=operation)
    assert jobs.exists()
    node_jobs = jobs.filter(kind__in=[ValidationJob.Kind.GPU, ValidationJob.Kind.NCCL_LOCAL])
    assert set(node_jobs.values_list("vm_name", flat=True)) == {"gpu-node-02"}
    assert not jobs.filter(kind=ValidationJob.Kind.NCCL_ALL).exists()
    assert jobs.filter(kind=ValidationJob.Kind.IB_CLIENT).count() == 3  # round the small ring
    assert operation.evidence["focus"] == focus.pk


def test_under_notify_a_suspect_is_only_told_nothing_runs_nothing_is_replaced(
    world, cluster, django_capture_on_commit_callbacks
):
    spare(world, cluster, "kept-01", "10.0.1.1")
    suspect("gpu-node-03", django_capture_on_commit_callbacks)
    assert not validations(cluster).exists()
    assert vm("gpu-node-03").health == VmHealth.SUSPECT
    assert not Operation.objects.filter(kind=Operation.Kind.REPLACE).exists()
    assert heal.proposal(cluster) == []


def test_a_suspect_is_checked_and_judged_bad_under_propose_nothing_is_replaced(
    world, cluster, django_capture_on_commit_callbacks
):
    policy.set_policy(cluster.pk, actor=world.admin, policy="propose")
    spare(world, cluster, "kept-01", "10.0.1.1")
    suspect("gpu-node-03", django_capture_on_commit_callbacks)
    (run,) = validations(cluster)
    assert run.actor is None and run.evidence["code"] == health.STRAGGLER
    assert run.evidence["policy"] == "propose"
    assert sorted(run.items.values_list("target_name", flat=True)) == [
        "gpu-node-02",
        "gpu-node-03",
        "gpu-node-04",
    ]
    assert run.validation.verdicts.get(vm_name="gpu-node-03").verdict == Verdict.BAD
    assert vm("gpu-node-03").health == VmHealth.ISOLATED
    assert vm("gpu-node-02").health == VmHealth.OK  # a neighbour judged 정상
    assert not Operation.objects.filter(kind=Operation.Kind.REPLACE).exists()
    assert vm("gpu-node-03").cluster_id == cluster.pk


def test_no_second_run_while_one_is_open_and_none_on_a_stopped_cluster(world, cluster):
    policy.set_policy(cluster.pk, actor=world.admin, policy="propose")
    operations.start_validation(cluster.pk, actor=world.admin)
    node = vm("gpu-node-02")
    type(node).objects.filter(pk=node.pk).update(health=VmHealth.SUSPECT)
    assert heal.check_suspect(node.pk) is None
    assert validations(cluster).count() == 1
    type(cluster).objects.filter(pk=cluster.pk).update(status=ClusterStatus.TERMINATED)
    Operation.objects.update(finished_at=cluster.created_at)
    assert heal.check_suspect(node.pk) is None


def test_under_propose_the_cluster_proposes_the_spare(
    world, cluster, django_capture_on_commit_callbacks
):
    policy.set_policy(cluster.pk, actor=world.admin, policy="propose")
    spare(world, cluster, "kept-01", "10.0.1.1")
    suspect("gpu-node-03", django_capture_on_commit_callbacks)
    cluster.refresh_from_db()
    (found,) = heal.proposal(cluster)
    assert (found["member"].name, found["spare"].name) == ("gpu-node-03", "kept-01")
    assert not Operation.objects.filter(kind=Operation.Kind.REPLACE).exists()


def test_under_auto_the_spare_takes_the_rank_and_its_links_are_checked(
    world, cluster, django_capture_on_commit_callbacks
):
    policy.set_policy(cluster.pk, actor=world.admin, policy="auto")
    spare(world, cluster, "kept-01", "10.0.1.1")
    suspect("gpu-node-03", django_capture_on_commit_callbacks)
    (replace,) = Operation.objects.filter(kind=Operation.Kind.REPLACE)
    assert replace.done and replace.failed == 0 and replace.actor is None
    assert replace.evidence["policy"] == "auto" and replace.evidence["set_by"] == "admin"
    assert replace.evidence["code"] == health.STRAGGLER or replace.evidence["run"]
    ranks = dict(cluster.members.values_list("name", "node_rank"))
    assert ranks["kept-01"] == 2 and "gpu-node-03" not in ranks
    assert vm("kept-01").status == VmStatus.RUNNING and vm("kept-01").health == VmHealth.OK
    assert vm("gpu-node-03").health == VmHealth.ISOLATED
    check = validations(cluster).last()
    assert check.evidence["code"] == "replace_joined"
    assert check.validation.verdicts.get(vm_name="kept-01").verdict == Verdict.OK
    acted = AuditEvent.objects.filter(action="cluster.policy_act", outcome="SUCCEEDED")
    assert acted.count() == 2 and all("admin" in event.message for event in acted)


def test_a_spare_judged_bad_makes_way_for_the_next_and_none_left_stays_isolated(
    world, cluster, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setitem(agent_sim.STRAGGLERS, "kept-bad", 3)
    policy.set_policy(cluster.pk, actor=world.admin, policy="auto")
    spare(world, cluster, "kept-bad", "10.0.1.1")
    spare(world, cluster, "kept-good", "10.0.1.2")
    suspect("gpu-node-03", django_capture_on_commit_callbacks)
    ranks = dict(cluster.members.values_list("name", "node_rank"))
    assert ranks == {"gpu-node-01": 0, "gpu-node-02": 1, "kept-good": 2, "gpu-node-04": 3}
    assert vm("kept-bad").cluster_id is None and vm("kept-bad").health == VmHealth.ISOLATED
    replaces = Operation.objects.filter(kind=Operation.Kind.REPLACE)
    assert replaces.count() == 2 and all(op.failed == 0 for op in replaces)


def test_with_no_spare_left_the_failed_member_stays_isolated_with_the_reason(
    world, cluster, django_capture_on_commit_callbacks
):
    policy.set_policy(cluster.pk, actor=world.admin, policy="auto")
    suspect("gpu-node-03", django_capture_on_commit_callbacks)
    assert vm("gpu-node-03").cluster_id == cluster.pk
    assert vm("gpu-node-03").health == VmHealth.ISOLATED
    refused = AuditEvent.objects.get(action="cluster.policy_act", outcome="REFUSED")
    assert refused.code == "no_spare"
    assert not Operation.objects.filter(kind=Operation.Kind.REPLACE).exists()
