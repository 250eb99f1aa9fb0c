"""Confirmations, progress and results as the server writes them: the stop dialog names the
cluster and the members it stops, with the particle the name takes; the header names a
running operation and offers nothing that contradicts it; an operation's outcome is never
worded as success when an item failed (card, toast, 활동, audit); disabled buttons say why
in visible text; 검증's refusals name the fact; the capacity error names what is short and
where there is room."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone, translation

from clusters import operations, outcome, services
from clusters.models import ClusterStatus, Operation, OperationItem
from clusters.validation.rules import validate_refusal
from portal.catalog.models import FabricType
from portal.foundation import errors
from portal.iam.permissions import Perm
from portal.models import AuditEvent, Role, RoleBinding
from vms.models import BillingType, VmStatus

Item = OperationItem.Status
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _korean():
    """Messages read here directly are Korean whatever a test before left active."""
    with translation.override("ko"):
        yield


def body(response):
    return response.content.decode()


def url(name, pk):
    return reverse(f"clusters:{name}", args=[pk])


def named_members(world, cluster, names, status=VmStatus.STOPPED):
    return [
        world.vm(
            name,
            cluster=cluster,
            status=status,
            zone=cluster.zone,
            instance_type=cluster.instance_type,
        )
        for name in names
    ]


# -- The stop dialog ----------------------------------------------------------------------


def test_the_stop_dialog_names_the_cluster_and_the_members_it_would_stop(world, login):
    cluster = world.cluster("ib-demo", status=ClusterStatus.RUNNING)
    names = [f"gpu-node-0{i}" for i in range(1, 5)]
    named_members(world, cluster, names, status=VmStatus.RUNNING)
    page = body(login("admin").get(url("cluster_detail", cluster.pk)))
    assert 'hx-confirm="ib-demo를 중지합니다"' in page
    # Before anything is ticked, the dialog says which members run (in the indicative); the
    # consequence of the option is said once it is ticked.
    assert re.search(
        r'<p id="stop-dialog-members"[^>]*>실행 중인 멤버 4대: '
        r"gpu-node-01, gpu-node-02, gpu-node-03, gpu-node-04</p>",
        page,
    )
    assert re.search(
        r'<p id="stop-members-line"[^>]* hidden>'
        r"멤버 4대를 먼저 중지한 뒤 클러스터를 중지합니다.</p>",
        page,
    )
    # The seed's rule, worded for the dialog whose option lifts it.
    assert (
        "먼저 모든 가상머신을 종료해야 합니다. 아래 항목을 선택하면 이 창에서 함께 종료합니다."
        in page
    )
    # The option lifts the seed's rule, so the button is usable and the rule is said in
    # the dialog (beside the option), not as the header's reason for a disabled button.
    assert 'id="stop-reason"' not in page and 'id="stop-dialog-reason"' in page
    assert 'id="cluster-stop" class="btn btn-danger">' in page
    assert "을(를)" not in page and "를(을)" not in page


def test_the_stop_dialog_shortens_a_long_list_of_names(world, login):
    cluster = world.cluster("big", status=ClusterStatus.RUNNING)
    named_members(world, cluster, [f"n-{i:02}" for i in range(1, 9)], status=VmStatus.RUNNING)
    page = body(login("admin").get(url("cluster_header", cluster.pk)))
    assert "실행 중인 멤버 8대: n-01, n-02, n-03, n-04, n-05 외 3대</p>" in page


def delete_detail(page):
    found = re.search(
        r'data-confirm-ok="삭제" data-confirm-danger\s+data-confirm-detail="([^"]*)"', page
    )
    assert found is not None, "no delete confirmation"
    return found.group(1)


def test_the_delete_dialog_names_and_counts_the_members_it_detaches(world, login):
    cluster = world.cluster("idle")
    client = login("admin")
    assert delete_detail(body(client.get(url("cluster_header", cluster.pk)))) == (
        "분리할 멤버 가상머신이 없습니다."
    )
    named_members(world, cluster, ["gpu-node-02", "gpu-node-01", "gpu-node-03"])
    assert delete_detail(body(client.get(url("cluster_header", cluster.pk)))) == (
        "멤버 3대(gpu-node-01, gpu-node-02, gpu-node-03)는 분리되어 일반 가상머신으로 남습니다."
    )
    # A role that deletes clusters but may not read VMs is told how many, not which.
    user = get_user_model().objects.create_user("cluster-deleter")
    role = Role.objects.create(name="deleter", permissions=[Perm.CLUSTER_READ, Perm.CLUSTER_DELETE])
    RoleBinding.objects.create(user=user, project=world.demo, role=role)
    world.users["cluster-deleter"] = user
    page = body(login("cluster-deleter").get(url("cluster_header", cluster.pk)))
    assert delete_detail(page) == "멤버 3대는 분리되어 일반 가상머신으로 남습니다."
    assert "gpu-node-01" not in page


def test_the_vm_delete_dialog_says_what_is_lost(world, login):
    vm = world.vm("lonely")
    page = body(login("admin").get(reverse("vms:vm_edit", args=[vm.pk])))
    assert (
        'data-confirm-detail="디스크와 사설 IP가 반납되고, 이 가상머신의 메트릭 기록과 페이지는'
        in page
    )


def test_the_seed_sentence_is_said_in_the_header_only_where_it_applies(world, login):
    cluster = world.cluster("ib-demo", status=ClusterStatus.RUNNING)
    named_members(world, cluster, ["gpu-node-01", "gpu-node-02"], status=VmStatus.RUNNING)
    still_running = errors.MembersStillRunning().message
    page = body(login("admin").get(url("cluster_header", cluster.pk)))
    assert page.count(still_running) == 1  # in the dialog's options only
    # Nothing runs: no sentence at all, and a plain confirmed stop.
    cluster.members.update(status=VmStatus.STOPPED)
    page = body(login("admin").get(url("cluster_header", cluster.pk)))
    assert still_running not in page and "stop-options" not in page
    assert 'hx-confirm="ib-demo를 중지합니다"' in page


def test_every_confirmation_on_the_members_tab_uses_the_dialog_with_the_right_particle(
    world, login
):
    cluster = world.cluster("train", status=ClusterStatus.RUNNING)
    named_members(world, cluster, ["gpu-node-01", "gpu-node-02", "gpu-node-03"])
    page = body(login("admin").get(url("cluster_members", cluster.pk)))
    assert 'hx-confirm="gpu-node-01을 시작합니다"' in page
    assert 'hx-confirm="gpu-node-02를 시작합니다"' in page
    assert (
        'hx-confirm="선택한 멤버 {n}대를 시작합니다"' in page and "data-confirm-selection" in page
    )
    assert 'hx-confirm="중지된 멤버 3대를 시작합니다"' in page
    assert "을(를)" not in page and "하시겠습니까" not in page
    detached = world.cluster("idle")
    named_members(world, detached, ["gpu-node-11", "gpu-node-12", "gpu-node-13"])
    page = body(login("admin").get(url("cluster_members", detached.pk)))
    assert 'hx-confirm="gpu-node-11을 idle에서 분리합니다"' in page
    assert 'hx-confirm="gpu-node-12를 idle에서 분리합니다"' in page


def test_a_disabled_detach_says_why_in_visible_text(world, login):
    cluster = world.cluster("train", status=ClusterStatus.RUNNING)
    named_members(world, cluster, ["a", "b"])
    page = body(login("admin").get(url("cluster_members", cluster.pk)))
    reason = errors.NotEnoughMembers().message
    assert f'id="detach-reason-1" role="note">멤버를 분리할 수 없습니다. {reason}</p>' in page
    assert 'aria-describedby="detach-reason-1"' in page


# -- The header while an operation runs ---------------------------------------------------


def test_while_an_operation_runs_the_header_names_it_and_offers_nothing_contradicting(world, login):
    cluster = world.cluster("ib-demo", status=ClusterStatus.RUNNING)
    members = named_members(world, cluster, ["n1", "n2", "n3"], status=VmStatus.STOPPING)
    members[0].status = VmStatus.STOPPED
    members[0].save(update_fields=["status"])
    operation = Operation.objects.create(
        kind=Operation.Kind.STOP_CLUSTER, project=cluster.project, cluster=cluster
    )
    for position, vm in enumerate(members[1:]):
        OperationItem.objects.create(
            operation=operation,
            position=position,
            vm=vm,
            target_name=vm.name,
            status=Item.SUCCEEDED if position == 0 else Item.PENDING,
        )
    client = login("admin")
    header = body(client.get(url("cluster_header", cluster.pk)))
    assert 'id="header-operation"' in header and "클러스터 중지 진행 중 · " in header
    assert '<span class="op-count">1/2</span>' in header and "대기 1대" in header
    for offered in ('id="cluster-stop"', 'id="callout-start-all"', "클러스터 시작"):
        assert offered not in header
    assert "every 2s" in header  # polls until it is done
    tab = body(client.get(url("cluster_members", cluster.pk)))
    assert 'id="members-busy"' in tab and 'id="start-all"' not in tab
    operation.finished_at = timezone.now()
    operation.save(update_fields=["finished_at"])
    cluster.members.update(status=VmStatus.STOPPED)
    header = body(client.get(url("cluster_header", cluster.pk)))
    assert 'id="header-operation"' not in header and 'id="cluster-stop"' in header


# -- Outcome words ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("done", "total", "finished", "failed", "state", "text"),
    [
        (False, 4, 2, 0, "running", "진행 2/4"),
        (False, 4, 3, 1, "running", "진행 3/4 · 실패 1"),
        (True, 3, 3, 0, "succeeded", "성공 3/3"),
        (True, 3, 3, 1, "partial", "성공 2 · 실패 1"),
        (True, 1, 1, 1, "failed", "실패 1"),
        (True, 0, 0, 0, "succeeded", "완료"),
    ],
)
def test_an_outcome_is_worded_as_success_only_when_every_item_succeeded(
    world, done, total, finished, failed, state, text
):
    operation = Operation(kind=Operation.Kind.START_MEMBERS, project=world.demo)
    operation.finished_at = timezone.now() if done else None
    result = outcome.describe(operation, total, finished, failed)
    assert (result.state, result.text) == (state, text)
    assert "완료" not in result.text or total == 0


def test_one_failed_item_is_failure_on_the_card_in_the_toast_in_activity_and_audit(world, login):
    cluster = world.cluster()
    spot = world.vm("spot", billing_type=BillingType.SPOT)
    client = login("admin")
    response = client.post(url("cluster_attach", cluster.pk), {"vm": [spot.pk]}, **HX)
    card = body(response)
    assert "실패 1" in card and "완료" not in card and 'data-outcome="failed"' in card
    assert "성공" not in response["HX-Trigger"].encode().decode("unicode_escape")
    activity = body(client.get(url("cluster_activity", cluster.pk)))
    table = re.search(r'class="table operations-table">.*?</table>', activity, re.S).group(0)
    assert 'data-outcome="failed"' in table and "outcome-succeeded" not in table
    event = AuditEvent.objects.get(action="operation.attach")
    assert event.outcome == AuditEvent.Outcome.FAILED and "1대 중 1대 실패" in event.text
    # Every item succeeding is 성공, said so.
    good = world.vm("good")
    client.post(url("cluster_attach", cluster.pk), {"vm": [good.pk]}, **HX)
    event = AuditEvent.objects.filter(action="operation.attach").order_by("-id").first()
    assert event.outcome == AuditEvent.Outcome.SUCCEEDED and event.text == "1대 모두 성공"


# -- The attach rules, naming the fact ---------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "code", "short"),
    [
        ({"billing_type": BillingType.SPOT}, "spot_or_dr_vm", None),
        ({"zone": "zone_b"}, "vm_other_zone", "다른 가용 영역 (kr-central-1b)"),
        ({"instance_type": "l40s"}, "vm_other_instance_type", "인스턴스 유형이 다름 (gpu.l40sx4)"),
        ({"status": VmStatus.RUNNING}, "vm_not_eligible", None),
        # What stopping cannot fix is said first.
        ({"status": VmStatus.RUNNING, "zone": "zone_b"}, "vm_other_zone", None),
        ({"status": VmStatus.RUNNING, "disaster_recovery": True}, "spot_or_dr_vm", None),
    ],
)
def test_the_attach_rule_names_the_fact(world, kw, code, short):
    cluster = world.cluster()
    kw = {
        k: getattr(world, v) if isinstance(v, str) and hasattr(world, v) else v
        for k, v in kw.items()
    }
    refusal = services.attach_refusal(world.vm("n1", **kw), cluster)
    assert refusal.code == code
    if short:
        assert refusal.short == short
    assert isinstance(refusal, errors.VmNotEligible | errors.SpotOrDrVm)


def test_the_attach_panel_says_per_vm_what_refuses_it(world, login):
    cluster = world.cluster("target")
    world.vm("zone-b-1", zone=world.zone_b)
    world.vm("running-1", status=VmStatus.RUNNING)
    world.vm("stopping-1", status=VmStatus.STOPPING)
    world.vm("l40s-1", instance_type=world.l40s)
    page = body(login("admin").get(url("cluster_attach", cluster.pk), **HX))
    for reason in (
        "다른 가용 영역 (kr-central-1b)",
        "실행중 — 먼저 중지하세요",
        "중지중 — 중지가 끝나면 연결할 수 있습니다",
        "인스턴스 유형이 다름 (gpu.l40sx4)",
    ):
        assert reason in page
    assert 'id="attach-search"' in page and "attach-actions" in page
    assert 'id="attach-none"' in page  # nothing to attach: 연결 is disabled and says why


# -- 검증's refusals --------------------------------------------------------------------


def test_validation_refusals_name_the_fact(world, login):
    cluster = world.cluster("idle")
    named_members(world, cluster, ["a", "b", "c", "d"])
    assert validate_refusal(cluster, 0, False).code == "validation_cluster_not_running"
    section = body(login("admin").get(url("validation_section", cluster.pk)))
    assert "클러스터가 실행중일 때 검증할 수 있습니다" in section and "disabled" in section

    cluster.status = ClusterStatus.RUNNING
    cluster.save(update_fields=["status"])
    assert validate_refusal(cluster, 1, False).code == "not_enough_running_members"
    section = body(login("admin").get(url("validation_section", cluster.pk)))
    assert "실행중인 멤버가 2대 이상 필요합니다" in section
    assert "가상머신 2대 이상이 필요합니다" not in section
    assert 'id="validation-start-all"' in section
    assert 'hx-confirm="중지된 멤버 4대를 시작합니다"' in section
    # A viewer sees neither the button nor the start.
    assert 'id="validation-start-all"' not in body(
        login("viewer").get(url("validation_section", cluster.pk))
    )


# -- The capacity error -------------------------------------------------------------------


def test_the_capacity_error_names_what_is_short_and_where_there_is_room(
    world, django_capture_on_commit_callbacks
):
    world.capacity(1)
    world.capacity(4, zone=world.zone_b)
    cluster = world.cluster("big")
    world.members(cluster, 2)
    with django_capture_on_commit_callbacks(execute=True):
        operations.start_cluster_op(cluster.pk, actor=world.admin)
    cluster.refresh_from_db()
    error = cluster.last_error
    assert error.code == "capacity_unavailable"
    assert error.params["room"] == [["kr-central-1b", 4]]
    assert error.message == (
        "kr-central-1a의 H100 · InfiniBand 노드가 부족합니다: 요청 2노드, 가용 1노드. "
        "여유가 있는 영역: kr-central-1b(4노드)"
    )
    stored = errors.CapacityUnavailable(**{**error.params, "room": []})
    assert "다른 영역에도 여유가 없습니다" in stored.message
    assert errors.CapacityUnavailable().message.startswith("가용 영역의 자원이 부족하여")


def test_the_capacity_error_speaks_english(world, settings):
    error = errors.CapacityUnavailable(
        zone="kr-central-1a",
        instance_type="L40S",
        fabric="RoCEv2",
        requested=2,
        available=1,
        room=[["kr-central-1b", 8]],
    )
    with translation.override("en"):
        text = error.message
    assert "kr-central-1a" in text and "L40S" in text and "kr-central-1b" in text
    assert not any("\uac00" <= ch <= "\ud7a3" for ch in text), text


def test_fabric_is_named_for_roce_too(world):
    world.capacity(0, instance_type=world.l40s, fabric=FabricType.ROCE_V2)
    cluster = world.cluster("l40s", instance_type=world.l40s, fabric_type=FabricType.ROCE_V2)
    from portal.compute.backends import get_backend

    with pytest.raises(errors.CapacityUnavailable) as caught:
        get_backend().allocate(cluster, 2)
    assert "L40S · RoCEv2" in caught.value.message


def test_the_vm_page_confirms_its_stop_delete_and_detach_with_the_right_particle(world, login):
    cluster = world.cluster("ib-demo")
    (member,) = named_members(world, cluster, ["gpu-node-01"])
    page = body(login("admin").get(reverse("vms:vm_edit", args=[member.pk])))
    assert 'hx-confirm="gpu-node-01을 ib-demo에서 분리합니다"' in page
    assert 'data-confirm-when="action=detach"' in page
    assert 'hx-confirm="gpu-node-01을 시작합니다"' in page
    loose = world.vm("gpu-node-02")
    page = body(login("admin").get(reverse("vms:vm_edit", args=[loose.pk])))
    assert 'hx-confirm="gpu-node-02를 삭제합니다"' in page and "분리합니다" not in page
    assert "을(를)" not in page
