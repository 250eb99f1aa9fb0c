"""A VM's health (``vms.health``): each piece of evidence moves it by the one table, writes
one audit event, and nothing when it changes nothing; the beat's sweep of silent agents;
a dead guest, GPU errors, 검증 and 교체 as its sources; the members tab, the VM page, the
활동 tab and the Prometheus exposition show it."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone, translation
from prometheus_client.parser import text_string_to_metric_families

from clusters import operations, services
from clusters.models import ClusterStatus, Operation
from clusters.models.validation import Verdict
from metrics import federate, liveness
from metrics import services as metrics_services
from metrics.models import MetricsToken
from metrics.storage import exposition
from portal.foundation import errors
from portal.models import AuditEvent
from tests.races import race
from vms import health, progress
from vms.models import BillingType, VirtualMachine, VmHealth, VmStatus


@pytest.fixture(autouse=True)
def _fresh():
    cache.clear()
    liveness.forget()
    yield
    liveness.forget()


def health_events(vm):
    return AuditEvent.objects.filter(
        target_type="vm", target_id=vm.pk, action__startswith="vm.health_"
    )


def agent_called(vm, seconds_ago):
    """``vm``'s agent last called ``seconds_ago`` (its VM started an hour ago)."""
    now = timezone.now()
    VirtualMachine.objects.filter(pk=vm.pk).update(status_changed_at=now - timedelta(hours=1))
    MetricsToken.objects.filter(vm=vm).update(last_seen_at=now - timedelta(seconds=seconds_ago))


@pytest.fixture
def live(world):
    """A running cluster of two running members whose agents called 5 s ago."""
    cluster = world.cluster("live", status=ClusterStatus.RUNNING)
    members = world.members(cluster, 2, status=VmStatus.RUNNING)
    for vm in members:
        metrics_services.rotate_token(vm.pk, actor=None)
        agent_called(vm, 5)
    return cluster, members


def fresh(vm):
    return VirtualMachine.objects.get(pk=vm.pk)


# ---------------------------------------------------------------------------------------------
# The agent silent, and back


def test_a_silent_agent_makes_its_member_suspect_once_and_its_call_clears_it(live):
    _cluster, (quiet, fine) = live
    assert health.sweep() == []
    agent_called(quiet, liveness.silent_seconds() + 1)
    (change,) = health.sweep()
    assert (change.vm_id, change.before, change.after) == (quiet.pk, "OK", "SUSPECT")
    quiet = fresh(quiet)
    assert quiet.health == VmHealth.SUSPECT and quiet.health_changed_at is not None
    assert quiet.health_code == "health_agent_silent"
    with translation.override("ko"):
        assert quiet.health_evidence == "에이전트가 45초 넘게 응답하지 않았습니다."
    with translation.override("en"):
        assert "45" in quiet.health_evidence and "에이전트" not in quiet.health_evidence
    assert fresh(fine).health == VmHealth.OK
    # Said again every pass, written once.
    assert health.sweep() == [] and health_events(quiet).count() == 1
    event = health_events(quiet).get()
    assert event.action == "vm.health_suspect" and event.actor is None
    assert event.cluster_id == quiet.cluster_id and event.outcome == "SUCCEEDED"
    agent_called(quiet, 2)
    (change,) = health.sweep()
    assert (change.before, change.after, change.code) == ("SUSPECT", "OK", "health_agent_back")
    assert fresh(quiet).health == VmHealth.OK and health_events(quiet).count() == 2
    assert health.sweep() == []


def test_the_sweep_judges_only_running_members_whose_agent_called_since_they_started(world):
    cluster = world.cluster("live", status=ClusterStatus.RUNNING)
    stopped, booting = world.members(cluster, 2, status=VmStatus.RUNNING)
    alone = world.vm("alone", status=VmStatus.RUNNING)
    for vm in (stopped, booting, alone):
        metrics_services.rotate_token(vm.pk, actor=None)
        agent_called(vm, 600)
    VirtualMachine.objects.filter(pk=stopped.pk).update(status=VmStatus.STOPPED)
    # Started again after its agent's last call: starting, not silent.
    VirtualMachine.objects.filter(pk=booting.pk).update(status_changed_at=timezone.now())
    assert health.sweep() == []
    assert set(VirtualMachine.objects.values_list("health", flat=True)) == {VmHealth.OK}


def test_the_sweep_costs_two_queries_when_nothing_changes(live, django_assert_num_queries):
    with django_assert_num_queries(2):
        assert health.sweep() == []


def test_the_agent_back_clears_only_what_silence_or_a_dead_guest_set(live):
    _cluster, (vm, _other) = live
    health.gpu_error(vm.pk, "gpu_xid", {"gpu": 3, "xid": 79, "at": 0})
    assert health.sweep() == []  # its agent calls, but the XID stands
    assert fresh(vm).health_code == "gpu_xid"
    # Silence does not make an isolated member merely suspect.
    health.apply_health(vm.pk, health.VALIDATED_BAD, {"run": 1, "reasons": []})
    agent_called(vm, liveness.silent_seconds() + 1)
    assert health.sweep() == [] and fresh(vm).health == VmHealth.ISOLATED


# ---------------------------------------------------------------------------------------------
# A dead guest, GPU errors, the straggler


@pytest.mark.parametrize(
    ("reason", "code"),
    [("guest_crashed", "health_guest_crashed"), ("domain_destroyed", "health_domain_destroyed")],
)
def test_a_guest_that_died_while_it_should_run_is_suspect(world, reason, code):
    vm = world.vm("gone", status=VmStatus.RUNNING)
    VirtualMachine.objects.filter(pk=vm.pk).update(
        status_changed_at=timezone.now() - timedelta(minutes=1)
    )
    assert progress.domain_stopped(vm.pk, reason, timezone.now())
    vm = fresh(vm)
    assert (vm.status, vm.health, vm.health_code) == (VmStatus.STOPPED, VmHealth.SUSPECT, code)
    assert health_events(vm).get().code == code


def test_a_guest_shut_down_from_inside_is_no_fault(world):
    vm = world.vm("done", status=VmStatus.RUNNING)
    VirtualMachine.objects.filter(pk=vm.pk).update(
        status_changed_at=timezone.now() - timedelta(minutes=1)
    )
    assert progress.domain_stopped(vm.pk, "guest_shutdown", timezone.now())
    assert fresh(vm).health == VmHealth.OK and not health_events(vm).exists()


def test_a_gpu_error_makes_the_vm_suspect_naming_the_gpu_and_counter(world):
    vm = world.vm("gpu")
    health.gpu_error(vm.pk, "gpu_ecc_uncorrectable", {"gpu": 2, "count": 4, "at": 1})
    vm = fresh(vm)
    assert vm.health == VmHealth.SUSPECT
    with translation.override("ko"):
        assert vm.health_evidence == "GPU 2에서 정정할 수 없는 ECC 오류가 발생했습니다 (누적 4건)."
    # The same event again changes nothing; a larger count is new evidence.
    health.gpu_error(vm.pk, "gpu_ecc_uncorrectable", {"gpu": 2, "count": 4, "at": 1})
    assert health_events(vm).count() == 1
    health.gpu_error(vm.pk, "gpu_ecc_uncorrectable", {"gpu": 2, "count": 6, "at": 2})
    assert health_events(vm).count() == 2 and fresh(vm).health_params["count"] == 6
    assert health.gpu_error(vm.pk, "port_link_down", {"port": 1, "count": 1}) is None


def test_the_straggler_entry_point_makes_a_healthy_member_suspect(world):
    vm = world.vm("slow")
    change = health.straggler(vm.pk, "GPU", 21.44, 10)
    assert change is not None and change.after == VmHealth.SUSPECT
    with translation.override("ko"):
        assert fresh(vm).health_evidence == (
            "GPU 사용률의 클러스터 중앙값과의 차이 21.4%p가 10분 동안 이어졌습니다."
        )
    with translation.override("en"):  # the evidence keeps no words of either language
        assert fresh(vm).health_evidence == (
            "GPU utilisation stayed 21.4 pp from the cluster median for 10 minutes."
        )


def test_every_rule_names_a_notice_with_words(world):
    from portal.foundation.event_text import ACTION_LABELS, NOTICES

    assert set(health.RULES) <= set(NOTICES)
    assert {f"vm.health_{state.lower()}" for state in VmHealth.values} <= set(ACTION_LABELS)


# ---------------------------------------------------------------------------------------------
# 클러스터 검증


NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]


def running_cluster(world, names):
    world.capacity(16)
    cluster = world.cluster("train")
    for name in names:
        services.attach_vm(world.vm(name).pk, cluster.pk, actor=world.admin)
    cluster.members.update(status=VmStatus.RUNNING)
    cluster.status = ClusterStatus.RUNNING
    cluster.save()
    return cluster


def named(name):
    return VirtualMachine.objects.get(name=name)


def test_a_run_checks_the_suspect_isolates_the_bad_and_clears_the_good(
    world, django_capture_on_commit_callbacks
):
    """The simulator's gpu-node-03 is 불량; gpu-node-01, suspect before the run, is 점검 중
    while it runs and 정상 after."""
    cluster = running_cluster(world, NODES)
    health.apply_health(named("gpu-node-01").pk, health.SILENT, {"seconds": 45})
    with django_capture_on_commit_callbacks() as queued:
        operation = operations.start_validation(cluster.pk, actor=world.admin, level=1)
    checking = named("gpu-node-01")
    assert checking.health == VmHealth.CHECKING
    assert checking.health_params["was"]["code"] == health.SILENT
    assert named("gpu-node-02").health == VmHealth.OK  # a healthy member is not 점검 중
    with django_capture_on_commit_callbacks(execute=True):
        for callback in queued:
            callback()
    operation.refresh_from_db()
    assert operation.done
    judged = dict(operation.validation.verdicts.values_list("vm_name", "verdict"))
    assert judged["gpu-node-03"] == Verdict.BAD and judged["gpu-node-01"] == Verdict.OK
    assert named("gpu-node-01").health == VmHealth.OK
    assert named("gpu-node-01").health_code == health.VALIDATED_OK
    bad = named("gpu-node-03")
    assert bad.health == VmHealth.ISOLATED and bad.health_code == health.VALIDATED_BAD
    assert bad.health_params["run"] == operation.pk and bad.health_params["reasons"]
    with translation.override("ko"):
        assert bad.health_evidence.startswith("클러스터 검증에서 불량으로 판정되었습니다. ")
        assert "mlx5_5" in bad.health_evidence  # the verdict's reasons, in words
        event = health_events(bad).get()
        assert event.action == "vm.health_isolated" and event.actor == world.admin
        assert "mlx5_5" in event.text
    # The other two were 정상 and stay so: no event for them.
    assert not health_events(named("gpu-node-02")).exists()


def test_a_run_that_neither_passes_nor_fails_a_checked_member_puts_it_back(world):
    vm = world.vm("checked")
    health.gpu_error(vm.pk, "gpu_xid", {"gpu": 1, "xid": 48, "at": 5})
    locked = fresh(vm)
    health.validation_started([locked], 7, None)
    assert fresh(vm).health == VmHealth.CHECKING
    health.validation_judged({vm.pk: (Verdict.NO_ANSWER, [])}, 7, None)
    back = fresh(vm)
    assert (back.health, back.health_code) == (VmHealth.SUSPECT, "gpu_xid")
    assert back.health_params == {"gpu": 1, "xid": 48, "at": 5}
    # A 정상 member judged 점검 필요 stays 정상.
    ok = world.vm("fine")
    health.validation_judged({ok.pk: (Verdict.WARN, [])}, 7, None)
    assert fresh(ok).health == VmHealth.OK and not health_events(ok).exists()


# ---------------------------------------------------------------------------------------------
# 교체


def attached(world, cluster, names):
    for name in names:
        services.attach_vm(world.vm(name).pk, cluster.pk, actor=world.admin)
    return [named(name) for name in names]


def test_an_isolated_member_replaced_stays_isolated_and_the_spare_is_healthy(world):
    cluster = world.cluster()
    a, b = attached(world, cluster, ["a", "b"])
    health.apply_health(b.pk, health.VALIDATED_BAD, {"run": 3, "reasons": []})
    spare = world.vm("spare", billing_type=BillingType.RESERVED)
    health.apply_health(spare.pk, health.SILENT, {"seconds": 45})  # suspect once, long ago
    operation = operations.replace_member(cluster.pk, b.pk, spare.pk, actor=world.admin)
    assert operation.done and operation.last_error is None
    b, spare = fresh(b), fresh(spare)
    assert b.cluster_id is None
    assert (b.health, b.health_code) == (VmHealth.ISOLATED, health.VALIDATED_BAD)
    assert (spare.health, spare.health_code) == (VmHealth.OK, health.JOINED)
    assert spare.health_params == {"member": "b"}
    # 격리 → 교체 중 → 격리, each audited.
    assert list(health_events(b).order_by("id").values_list("action", flat=True)) == [
        "vm.health_isolated",
        "vm.health_replacing",
        "vm.health_isolated",
    ]


def test_a_member_is_replacing_while_its_replace_runs(world, django_capture_on_commit_callbacks):
    world.capacity(10)
    cluster = world.cluster()
    a, b = attached(world, cluster, ["a", "b"])
    VirtualMachine.objects.filter(pk__in=[a.pk, b.pk]).update(status=VmStatus.RUNNING)
    type(cluster).objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)
    spare = world.vm("spare")
    with django_capture_on_commit_callbacks() as queued:
        operation = operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    replacing = fresh(a)
    assert replacing.health == VmHealth.REPLACING
    with translation.override("ko"):
        assert replacing.health_evidence == "교체 중입니다 (예비 가상머신: spare)."
    with django_capture_on_commit_callbacks(execute=True):
        for callback in queued:
            callback()
    operation.refresh_from_db()
    assert operation.done and operation.last_error is None, operation.error_code
    assert fresh(a).health == VmHealth.OK  # it was 정상: back to it
    assert fresh(spare).health == VmHealth.OK and fresh(spare).status == VmStatus.RUNNING


def test_an_isolated_vm_is_no_spare(world, login):
    cluster = world.cluster()
    a, b = attached(world, cluster, ["a", "b"])
    isolated = world.vm("bad-spare")
    world.vm("good-spare")
    health.apply_health(isolated.pk, health.VALIDATED_BAD, {"run": 1, "reasons": []})
    with pytest.raises(errors.SpareIsolated) as refused:
        operations.replace_member(cluster.pk, a.pk, isolated.pk, actor=world.admin)
    assert refused.value.code == "spare_isolated"
    assert not Operation.objects.filter(kind=Operation.Kind.REPLACE).exists()
    assert fresh(a).health == VmHealth.OK  # the refusal changed nothing
    page = login("admin").get(
        reverse("clusters:member_replace", args=[cluster.pk]), {"member": a.pk}
    )
    text = page.content.decode()
    assert "good-spare" in text and "bad-spare" not in text


# ---------------------------------------------------------------------------------------------
# Where it shows


def test_the_members_tab_shows_a_members_health_with_its_evidence(live, login):
    cluster, (quiet, fine) = live
    client = login("viewer")
    page = client.get(f"/clusters/{cluster.pk}/vms/").content.decode()
    assert "row-health" not in page  # 정상 members carry no badge
    agent_called(quiet, liveness.silent_seconds() + 1)
    health.sweep()
    page = client.get(f"/clusters/{cluster.pk}/vms/").content.decode()
    assert page.count("row-health") == 1
    row = page[page.index(f'data-vm="{quiet.name}"') :].split("</tr>")[0]
    assert 'data-health="SUSPECT"' in row and "의심" in row
    assert "에이전트가 45초 넘게 응답하지 않았습니다." in row
    assert 'class="health-evidence member-health-why"' in row  # read without a hover
    assert login("other").get(f"/clusters/{cluster.pk}/vms/").status_code == 404
    # 격리 by a 검증: the row says so in a line; the verdict's reasons are the 검증 column's.
    reasons = [{"code": "ib_pair_idle", "level": "BAD", "params": {"client": "a", "server": "b"}}]
    health.apply_health(fine.pk, health.VALIDATED_BAD, {"reasons": reasons})
    client = login("viewer")
    page = client.get(f"/clusters/{cluster.pk}/vms/").content.decode()
    row = page[page.index(f'data-vm="{fine.name}"') :].split("</tr>")[0]
    assert "클러스터 검증에서 불량으로 판정되었습니다.</span>" in row and "ib_write_bw" not in row
    vm_page = client.get(reverse("vms:vm_edit", args=[fine.pk])).content.decode()
    assert "측정하는 동안 옮긴 데이터가 없습니다" in vm_page  # the VM page tells it whole


def test_the_vm_page_shows_its_health_and_evidence(world, login):
    vm = world.vm("page")
    client = login("viewer")
    page = client.get(reverse("vms:vm_edit", args=[vm.pk])).content.decode()
    assert "건강 상태" in page and 'data-health="OK"' in page
    health.gpu_error(vm.pk, "gpu_xid", {"gpu": 5, "xid": 79, "at": 0})
    page = client.get(reverse("vms:vm_edit", args=[vm.pk])).content.decode()
    assert 'data-health="SUSPECT"' in page and "GPU 5에서 XID 79 오류가 발생했습니다." in page
    assert login("other").get(reverse("vms:vm_edit", args=[vm.pk])).status_code == 404


def test_the_activity_tab_keeps_the_history(live, login):
    cluster, (quiet, _fine) = live
    agent_called(quiet, liveness.silent_seconds() + 1)
    health.sweep()
    agent_called(quiet, 1)
    health.sweep()
    page = login("viewer").get(reverse("clusters:cluster_activity", args=[cluster.pk]))
    text = page.content.decode()
    assert "건강 상태: 의심" in text and "건강 상태: 정상" in text
    assert "에이전트가 45초 넘게 응답하지 않았습니다." in text
    assert "에이전트가 다시 응답합니다." in text


def test_the_exposition_carries_each_members_health(live):
    cluster, (quiet, fine) = live
    health.apply_health(quiet.pk, health.VALIDATED_BAD, {"run": 1, "reasons": []})
    text = exposition.render(federate.members_of(cluster.project, cluster.pk)).decode()
    got = {
        (s.labels["vm"], s.labels["state"]): s.value
        for family in text_string_to_metric_families(text)
        if family.name == "vc_vm_health"
        for s in family.samples
    }
    assert len(got) == 2 * len(VmHealth.values)
    assert got[(quiet.name, "ISOLATED")] == 1 and got[(quiet.name, "OK")] == 0
    assert got[(fine.name, "OK")] == 1 and got[(fine.name, "SUSPECT")] == 0


# ---------------------------------------------------------------------------------------------
# Races: each change decides on the locked row


@pytest.mark.django_db(transaction=True)
def test_two_sweeps_at_once_write_one_change(live, monkeypatch):
    monkeypatch.setattr(health, "LISTENERS", [])  # the 의심 alone, not the 검증 it calls for
    _cluster, (quiet, _fine) = live
    agent_called(quiet, liveness.silent_seconds() + 1)
    first, second = race(health.sweep, health.sweep)
    assert len(first) + len(second) == 1
    assert health_events(quiet).count() == 1 and fresh(quiet).health == VmHealth.SUSPECT


@pytest.mark.django_db(transaction=True)
def test_silence_racing_a_replace_ends_the_same_whichever_goes_first(world):
    """A stopped member's replace is done at once: 교체 중 and back. The silence applied
    before it is remembered and restored, after it applies to the member as it is then;
    either way the member ends 의심 for its silence, and the spare joins 정상."""
    cluster = world.cluster()
    a, b = attached(world, cluster, ["a", "b"])
    spare = world.vm("spare")
    silence = {"seconds": liveness.silent_seconds()}
    race(
        lambda: health.apply_health(a.pk, health.SILENT, silence),
        lambda: operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin),
    )
    member = fresh(a)
    assert (member.health, member.health_code) == (VmHealth.SUSPECT, health.SILENT)
    assert member.cluster_id is None and fresh(spare).cluster_id == cluster.pk
    assert fresh(spare).health == VmHealth.OK
    assert health_events(a).filter(action="vm.health_replacing").count() == 1


def test_the_admin_shows_a_vms_health_in_words(world, client):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    vm = world.vm("admin-view")
    health.gpu_error(vm.pk, "gpu_xid", {"gpu": 0, "xid": 13, "at": 0})
    listed = client.get(reverse("admin:vms_virtualmachine_changelist")).content.decode()
    assert "의심" in listed
    form = client.get(reverse("admin:vms_virtualmachine_change", args=[vm.pk])).content.decode()
    assert "GPU 0에서 XID 13 오류가 발생했습니다." in form and "health_params" not in form


def test_the_straggler_sweep_suspects_the_member_named_and_clears_it_once_it_keeps_up(world):
    """The 메트릭 tab's rule, run by the beat: a GPU 30 %p under the median for 20 minutes makes
    its member 의심 with the GPU and the gap; once every GPU keeps up for the criteria's
    minutes, the rule names nobody and the member is 정상 again. The others are not touched."""
    from metrics import stragglers
    from tests.metrics.test_straggler import write

    cluster = world.cluster("heat", status=ClusterStatus.RUNNING)
    members = world.members(cluster, 3, status=VmStatus.RUNNING)
    now = timezone.now()
    write(
        members,
        now - timedelta(minutes=20),
        now - timedelta(seconds=5),
        lambda i, g, rng: 60.0 if (i, g) == (1, 2) else 92.0,
    )
    (change,) = stragglers.sweep()
    slow = VirtualMachine.objects.get(pk=members[1].pk)
    assert (change.vm_id, slow.health, slow.health_code) == (slow.pk, "SUSPECT", health.STRAGGLER)
    assert slow.health_params == {"device": "GPU 2", "gap": 32.0, "minutes": 5}
    with translation.override("ko"):
        assert slow.health_evidence == (
            "GPU 2 사용률의 클러스터 중앙값과의 차이 32.0%p가 5분 동안 이어졌습니다."
        )
    assert stragglers.sweep() == []  # named again: nothing new
    assert {vm.health for vm in VirtualMachine.objects.exclude(pk=slow.pk)} == {"OK"}
    # It keeps up from now on: twenty minutes later the rule names nobody.
    later = now + timedelta(minutes=20)
    write(members, now, later, lambda i, g, rng: 92.0)
    (change,) = stragglers.sweep(now=later)
    slow.refresh_from_db()
    assert (change.vm_id, slow.health, slow.health_code) == (
        slow.pk,
        "OK",
        health.STRAGGLER_GONE,
    )
    assert health_events(slow).count() == 2
