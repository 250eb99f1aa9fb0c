"""The cluster page as the place a cluster is run, as a user meets it: the 가상머신 연결 panel,
bulk start/stop, stop with members, the Operation's progress card, the header's running count
and callouts, and the VM pages' create-many and 클러스터 section.

Tasks run eagerly here (the suite's default), so an Operation that waits for VMs to settle is
done by the time the POST answers; the browser test walks the same flows with a real worker.
"""

import re

import pytest
from django.urls import reverse

from clusters.models import ClusterStatus, Operation, OperationItem
from clusters.operations.internal import MAX_TARGETS
from portal.catalog.models import FabricType
from portal.models import AuditEvent
from tests.pages import HX, SAME_TYPE_STOPPED, SPOT_OR_DR, UNATTACHABLE, body
from vms.models import BillingType, VirtualMachine, VmStatus

ALREADY_MEMBER = "이미 다른 클러스터에 연결된 가상머신입니다"
STILL_RUNNING = "실행 중인 가상머신이 있으면 먼저 모든 가상머신을 종료해야 합니다"
NOT_STOPPED = "중지된 가상머신만 분리하거나 삭제할 수 있습니다"
NOT_RUNNING = "클러스터가 실행중일 때만 멤버 가상머신을 시작할 수 있습니다"


def url(name, pk):
    return reverse(f"clusters:{name}", args=[pk])


def candidate_row(page, name):
    """The panel's <li> of the VM ``name``."""
    match = re.search(
        r'<li class="candidate[^"]*"[^>]*>(?:(?!</li>).)*?\b' + re.escape(name) + r"\b.*?</li>",
        page,
        re.S,
    )
    assert match, f"{name} is not listed"
    return match.group(0)


# -- 가상머신 연결 ------------------------------------------------------------------------


def test_empty_members_tab_says_so_and_offers_attach_or_says_why_not(world, login):
    cluster = world.cluster("empty")
    attach = f'href="{url("cluster_attach", cluster.pk)}"'
    page = body(login("operator").get(url("cluster_detail", cluster.pk)))
    assert page.count(attach) == 1 and 'id="callout-attach"' in page  # the header's callout
    # The tab itself says it is empty and offers 가상머신 연결 there.
    page = body(login("operator").get(url("cluster_members", cluster.pk)))
    empty = re.search(
        r'<div class="empty-state members-empty" id="members-empty">.*?</div>', page, re.S
    )
    assert empty is not None and "연결된 가상머신이 없습니다." in empty.group(0)
    assert 'id="open-attach"' in empty.group(0) and attach in empty.group(0)
    # A viewer sees the action, disabled, and why.
    page = body(login("viewer").get(url("cluster_members", cluster.pk)))
    assert "연결된 가상머신이 없습니다." in page
    assert url("cluster_attach", cluster.pk) not in page
    assert re.search(
        r'<button type="button" class="btn btn-primary" id="open-attach" disabled', page
    )
    assert (
        '<p class="reason member-note" id="members-update-reason" role="note">'
        "권한 없음: Resource.VirtualMachine.UPDATE</p>" in page
    )


def test_attach_panel_lists_eligible_vms_to_check_and_the_others_with_their_reason(world, login):
    cluster = world.cluster("target")
    elsewhere = world.cluster("elsewhere")
    for name in ("ok-1", "ok-2"):
        world.vm(name)
    world.vm("spot-1", billing_type=BillingType.SPOT)
    world.vm("dr-1", disaster_recovery=True)
    world.vm("running-1", status=VmStatus.RUNNING)
    world.vm("l40s-1", instance_type=world.l40s)
    world.vm("zone-b-1", zone=world.zone_b)
    world.vm("taken-1", cluster=elsewhere)
    world.vm("foreign-1", project=world.other)

    page = body(login("admin").get(url("cluster_attach", cluster.pk), **HX))

    assert "가상머신 연결" in page and SAME_TYPE_STOPPED in page
    assert "모두 선택 (2대)" in page
    for name in ("ok-1", "ok-2"):
        row = candidate_row(page, name)
        assert 'name="vm"' in row and "disabled" not in row and "ineligible" not in row
    expected = {
        "spot-1": SPOT_OR_DR,
        "dr-1": SPOT_OR_DR,
        # Each reason names the fact (the guidance line above says the rule).
        "running-1": "실행중 — 먼저 중지하세요",
        "l40s-1": "인스턴스 유형이 다름 (gpu.l40sx4)",
        "zone-b-1": "다른 가용 영역 (kr-central-1b)",
        "taken-1": f"{ALREADY_MEMBER} (elsewhere)",
    }
    for name, reason in expected.items():
        row = candidate_row(page, name)
        assert "ineligible" in row and "disabled" in row and reason in row, name
    assert "foreign-1" not in page
    # Eligible ones first.
    assert page.index("ok-2") < page.index("dr-1")


def test_attach_panel_needs_vm_update(world, login):
    cluster = world.cluster()
    response = login("viewer").get(url("cluster_attach", cluster.pk), **HX)
    assert response.status_code == 403
    assert "Resource.VirtualMachine.UPDATE 권한이 필요합니다." in body(response)


def test_attach_three_as_one_operation_with_progress_card(world, login):
    cluster = world.cluster()
    vms = [world.vm(f"n{i}") for i in range(3)]
    client = login("operator")

    response = client.post(url("cluster_attach", cluster.pk), {"vm": [v.pk for v in vms]}, **HX)

    assert response.status_code == 200
    page = body(response)
    assert "성공 3/3" in page and 'hx-trigger="every 1s"' not in page  # done: no polling
    assert "cluster-changed" in response["HX-Trigger"] and "toast" in response["HX-Trigger"]
    assert set(cluster.members.values_list("pk", flat=True)) == {v.pk for v in vms}
    operation = Operation.objects.get()
    assert operation.kind == Operation.Kind.ATTACH and operation.actor.username == "operator"
    assert operation.items.filter(status=OperationItem.Status.SUCCEEDED).count() == 3
    # Each VM went through the single attach: audited per VM.
    assert AuditEvent.objects.filter(action="vm.attach", outcome="SUCCEEDED").count() == 3


def test_one_refused_vm_fails_alone_and_its_message_is_on_the_card(world, login):
    cluster = world.cluster()
    good = world.vm("good")
    spot = world.vm("spot", billing_type=BillingType.SPOT)

    response = login("admin").post(
        url("cluster_attach", cluster.pk), {"vm": [good.pk, spot.pk]}, **HX
    )

    page = body(response)
    assert "성공 1 · 실패 1" in page and "완료" not in page
    assert re.search(r"<strong>spot</strong>: " + re.escape(SPOT_OR_DR), page)
    good.refresh_from_db()
    spot.refresh_from_db()
    assert good.cluster_id == cluster.pk and spot.cluster_id is None


@pytest.mark.parametrize("values", [[], ["abc"], ["1", "-1"], ["９"]], ids=repr)
def test_attach_with_no_or_nonsense_selection_changes_nothing(world, login, values):
    cluster = world.cluster()
    world.vm("n1")
    response = login("admin").post(url("cluster_attach", cluster.pk), {"vm": values}, **HX)
    assert response.status_code == 422
    assert response["HX-Retarget"] == "#attach-dialog"
    page = body(response)
    assert (
        "가상머신을 하나 이상 선택하세요." in page or "선택한 가상머신을 찾을 수 없습니다." in page
    )
    assert not Operation.objects.exists() and not cluster.members.exists()


def test_attach_past_the_operations_limit_is_refused_in_the_panel(world, login):
    """The console's limit is the operation's (``MAX_TARGETS``, which the API documents):
    one VM more is refused whole in the panel, in Korean, and nothing is attached."""
    cluster = world.cluster()
    good = world.vm("n1")
    values = [good.pk, *range(10_000, 10_000 + MAX_TARGETS)]
    response = login("admin").post(url("cluster_attach", cluster.pk), {"vm": values}, **HX)
    assert response.status_code == 422
    assert f"한 번에 최대 {MAX_TARGETS}대까지 처리할 수 있습니다." in body(response)
    assert not Operation.objects.exists() and not cluster.members.exists()


def test_attach_without_htmx_goes_to_the_operation_page(world, login):
    cluster = world.cluster()
    vm = world.vm("n1")
    client = login("admin")
    response = client.post(url("cluster_attach", cluster.pk), {"vm": [vm.pk]})
    operation = Operation.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("clusters:operation_detail", args=[operation.pk])
    page = body(client.get(response["Location"]))
    assert "성공 1/1" in page and "가상머신 연결" in page


# -- 분리 per row -------------------------------------------------------------------------


def test_row_detach_is_offered_for_stopped_members_and_answers_with_a_toast(world, login):
    cluster = world.cluster()
    a, b, c = world.members(cluster, 3)
    c.status = VmStatus.RUNNING
    c.save(update_fields=["status"])
    client = login("admin")
    page = body(client.get(url("cluster_members", cluster.pk)))
    assert f'aria-label="{a.name} 분리"' in page and f'aria-label="{c.name} 분리"' not in page

    response = client.post(url("cluster_detach", cluster.pk), {"vm": a.pk}, **HX)
    assert response.status_code == 204
    assert "분리" in response["HX-Trigger"].encode().decode("unicode_escape")
    a.refresh_from_db()
    assert a.cluster_id is None

    # A forged detach of the running member: refused with the rule's message, nothing moves.
    response = client.post(url("cluster_detach", cluster.pk), {"vm": c.pk}, **HX)
    assert NOT_STOPPED in response["HX-Trigger"].encode().decode("unicode_escape")
    c.refresh_from_db()
    assert c.cluster_id == cluster.pk


def test_row_detach_that_would_leave_one_member_is_shown_disabled_with_the_reason(world, login):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    a, _b = world.members(cluster, 2)
    page = body(login("admin").get(url("cluster_members", cluster.pk)))
    assert re.search(
        rf'aria-label="{a.name} 분리" disabled title="가상머신 2대 이상이 필요합니다"', page
    )


# -- 멤버 모두 시작 / 중지 -----------------------------------------------------------------


def test_bulk_start_is_offered_only_while_the_cluster_runs(world, login):
    cluster = world.cluster(status=ClusterStatus.TERMINATED)
    world.members(cluster, 2)
    page = body(login("admin").get(url("cluster_members", cluster.pk)))
    assert "멤버 모두 시작" not in page and "선택한 멤버 시작" not in page
    assert NOT_RUNNING in page
    cluster.status = ClusterStatus.RUNNING
    cluster.save(update_fields=["status"])
    page = body(login("admin").get(url("cluster_members", cluster.pk)))
    assert "멤버 모두 시작" in page and "선택한 멤버 시작" in page
    # A viewer sees the action disabled, with why (no form to send).
    page = body(login("viewer").get(url("cluster_members", cluster.pk)))
    assert url("cluster_start_members", cluster.pk) not in page
    assert (
        '<button type="button" class="btn" disabled aria-describedby="members-update-reason">'
        "멤버 모두 시작</button>" in page
    )
    assert "권한 없음: Resource.VirtualMachine.UPDATE" in page


def test_start_all_members_then_stop_the_selected_one(
    world, login, django_capture_on_commit_callbacks
):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    members = world.members(cluster, 3)
    client = login("operator")

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url("cluster_start_members", cluster.pk), **HX)
    assert response.status_code == 200
    operation = Operation.objects.get(kind=Operation.Kind.START_MEMBERS)
    assert operation.total == 3
    _poll_until_done(client, operation)
    assert set(cluster.members.values_list("status", flat=True)) == {VmStatus.RUNNING}

    with django_capture_on_commit_callbacks(execute=True):
        client.post(url("cluster_stop_members", cluster.pk), {"vm": [members[0].pk]}, **HX)
    operation = Operation.objects.get(kind=Operation.Kind.STOP_MEMBERS)
    assert operation.total == 1
    _poll_until_done(client, operation)
    statuses = dict(cluster.members.values_list("name", "status"))
    assert statuses == {
        members[0].name: VmStatus.STOPPED,
        members[1].name: VmStatus.RUNNING,
        members[2].name: VmStatus.RUNNING,
    }


def _poll_until_done(client, operation):
    """The card's poll: 200 while running, 286 (stop polling) with the final card when done."""
    for _attempt in range(20):
        response = client.get(reverse("clusters:operation_detail", args=[operation.pk]), **HX)
        if response.status_code == 286:
            page = body(response)
            assert f"성공 {operation.total}/{operation.total}" in page
            assert 'hx-trigger="every 1s"' not in page
            return page
        assert response.status_code == 200 and 'hx-trigger="every 1s"' in body(response)
    pytest.fail("the operation never finished")


def test_bulk_start_with_nonsense_ids_changes_nothing(world, login):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    world.members(cluster, 2)
    response = login("admin").post(url("cluster_start_members", cluster.pk), {"vm": "x"}, **HX)
    assert response.status_code == 422
    assert "가상머신을 하나 이상 선택하세요." in body(response)
    assert not Operation.objects.exists()
    assert set(cluster.members.values_list("status", flat=True)) == {VmStatus.STOPPED}


# -- 클러스터 중지 with members --------------------------------------------------------------


def test_stop_with_running_members_offers_the_checkbox_and_stops_all(
    world, login, django_capture_on_commit_callbacks
):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    world.members(cluster, 2, status=VmStatus.RUNNING)
    client = login("admin")
    page = body(client.get(url("cluster_detail", cluster.pk)))
    assert "멤버 가상머신도 함께 중지" in page and STILL_RUNNING in page

    # The plain stop still follows the seed's rule.
    response = client.post(url("cluster_stop", cluster.pk), **HX)
    assert response.status_code == 409 and STILL_RUNNING in body(response)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url("cluster_stop", cluster.pk), {"with_members": "1"}, **HX)
    assert response.status_code == 200
    operation = Operation.objects.get(kind=Operation.Kind.STOP_CLUSTER)
    _poll_until_done(client, operation)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.TERMINATED
    assert set(cluster.members.values_list("status", flat=True)) == {VmStatus.STOPPED}


def test_stop_checkbox_is_not_offered_when_nothing_runs_or_to_viewers(world, login):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    world.members(cluster, 2)
    assert "멤버 가상머신도 함께 중지" not in body(
        login("admin").get(url("cluster_detail", cluster.pk))
    )
    VirtualMachine.objects.filter(cluster=cluster).update(status=VmStatus.RUNNING)
    assert "멤버 가상머신도 함께 중지" not in body(
        login("viewer").get(url("cluster_detail", cluster.pk))
    )


# -- Header and callouts ------------------------------------------------------------------


def test_header_counts_running_members_and_calls_out_stopped_ones(world, login):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    a, _b, _c = world.members(cluster, 3)
    a.status = VmStatus.RUNNING
    a.save(update_fields=["status"])
    page = body(login("operator").get(url("cluster_header", cluster.pk)))
    assert "실행중 멤버 1/3" in page
    assert "멤버 2대가 중지되어 있습니다." in page and 'id="callout-start-all"' in page
    # A viewer sees the count, not the button; who may not read VMs sees neither.
    page = body(login("viewer").get(url("cluster_header", cluster.pk)))
    assert "실행중 멤버 1/3" in page and 'id="callout-start-all"' not in page


def test_empty_cluster_header_calls_out_attach(world, login):
    cluster = world.cluster()
    page = body(login("admin").get(url("cluster_detail", cluster.pk)))
    assert 'id="callout-empty"' in page and "실행중 멤버 0/0" in page
    assert 'id="callout-empty"' not in body(login("viewer").get(url("cluster_detail", cluster.pk)))


def test_start_and_stop_answer_with_a_toast(world, login):
    cluster = world.cluster()
    world.members(cluster, 2)
    response = login("admin").post(url("cluster_start", cluster.pk), **HX)
    assert "toast" in response["HX-Trigger"]


# -- 활동 ---------------------------------------------------------------------------------


def test_activity_tab_lists_operations_with_their_failures(world, login):
    cluster = world.cluster()
    good = world.vm("good")
    spot = world.vm("spot", billing_type=BillingType.SPOT)
    client = login("admin")
    client.post(url("cluster_attach", cluster.pk), {"vm": [good.pk, spot.pk]}, **HX)
    page = body(client.get(url("cluster_activity", cluster.pk)))
    assert "가상머신 연결" in page and "성공 1 · 실패 1" in page
    assert SPOT_OR_DR in page
    page = body(login("viewer").get(url("cluster_activity", cluster.pk)))
    assert "성공 1 · 실패 1" in page


def test_operation_of_another_project_is_invisible(world, login):
    cluster = world.cluster()
    vm = world.vm("n1")
    login("admin").post(url("cluster_attach", cluster.pk), {"vm": [vm.pk]}, **HX)
    operation = Operation.objects.get()
    response = login("other").get(reverse("clusters:operation_detail", args=[operation.pk]))
    assert response.status_code == 404


# -- VM create: 개수 and 생성 후 클러스터에 연결 ------------------------------------------------


def vm_form(world, **extra):
    return {
        "name": "batch",
        "zone": world.zone_a.pk,
        "instance_type": world.h100.pk,
        "billing_type": BillingType.ON_DEMAND,
        "count": 1,
        **extra,
    }


def test_create_many_vms_into_a_cluster(world, login):
    cluster = world.cluster("target")
    world.cluster("l40s", instance_type=world.l40s, fabric_type=FabricType.ROCE_V2)
    client = login("admin")
    page = body(client.get(reverse("vms:vm_create")))
    assert "개수" in page and "생성 후 클러스터에 연결" in page and "target (kr-central-1a" in page

    response = client.post(reverse("vms:vm_create"), vm_form(world, count=3, cluster=cluster.pk))

    assert response.status_code == 302
    assert response["Location"] == url("cluster_members", cluster.pk)
    names = sorted(cluster.members.values_list("name", flat=True))
    assert names == ["batch-01", "batch-02", "batch-03"]
    assert set(cluster.members.values_list("status", flat=True)) == {VmStatus.STOPPED}
    assert Operation.objects.get().kind == Operation.Kind.CREATE_VMS
    assert "가상머신 3대를 생성했습니다." in body(client.get(response["Location"]))


def test_create_many_refused_as_a_whole_if_a_name_is_taken(world, login):
    world.vm("batch-02")
    response = login("admin").post(reverse("vms:vm_create"), vm_form(world, count=3))
    assert response.status_code == 422
    assert not VirtualMachine.objects.filter(name__in=["batch-01", "batch-03"]).exists()


@pytest.mark.parametrize("count", ["0", "65", "-1", "x", "1e2"])
def test_create_count_out_of_range_is_a_form_error(world, login, count):
    response = login("admin").post(reverse("vms:vm_create"), vm_form(world, count=count))
    assert response.status_code == 422 and "has-error" in body(response)
    assert not VirtualMachine.objects.filter(name__startswith="batch").exists()


def test_create_into_a_cluster_of_another_type_is_not_offered(world, login):
    l40s = world.cluster("l40s", instance_type=world.l40s, fabric_type=FabricType.ROCE_V2)
    response = login("admin").post(reverse("vms:vm_create"), vm_form(world, cluster=l40s.pk))
    assert response.status_code == 422
    assert not VirtualMachine.objects.filter(name__startswith="batch").exists()


def test_single_create_still_goes_to_the_vm_page(world, login):
    response = login("admin").post(reverse("vms:vm_create"), vm_form(world))
    vm = VirtualMachine.objects.get(name="batch")
    assert response["Location"] == reverse("vms:vm_edit", args=[vm.pk])


# -- VM 클러스터 section offers only what can succeed -------------------------------------------


def test_member_is_offered_only_detach_and_no_cluster_dropdown(world, login):
    cluster = world.cluster("target")
    (vm,) = world.members(cluster, 1)
    page = body(login("admin").get(reverse("vms:vm_edit", args=[vm.pk])))
    assert "클러스터에서 분리" in page and "클러스터에 연결" not in page.split("cluster-section")[1]
    assert "연결할 클러스터" not in page
    assert SAME_TYPE_STOPPED in page  # the seed's guidance line stays


def test_non_member_is_not_offered_detach(world, login):
    world.cluster("target")
    vm = world.vm("n1")
    page = body(login("admin").get(reverse("vms:vm_edit", args=[vm.pk])))
    section = page.split('id="cluster-section"')[1]
    assert "클러스터에 연결" in section and "클러스터에서 분리" not in section
    assert "연결할 클러스터" in section


def test_after_an_in_page_attach_the_section_offers_detach_without_a_dropdown(world, login):
    cluster = world.cluster("target")
    vm = world.vm("n1")
    response = login("admin").post(
        reverse("vms:vm_cluster", args=[vm.pk]), {"action": "attach", "cluster": cluster.pk}, **HX
    )
    page = body(response)
    assert "target 클러스터에 연결했습니다." in page
    assert "클러스터에서 분리" in page and "연결할 클러스터" not in page


@UNATTACHABLE
def test_section_is_disabled_with_the_reason_for_vms_no_cluster_takes(world, login, kw, reason):
    world.cluster("target")
    vm = world.vm("n1", **kw)
    page = body(login("admin").get(reverse("vms:vm_edit", args=[vm.pk])))
    section = page.split('id="cluster-section"')[1]
    assert re.search(r'<fieldset[^>]* disabled aria-describedby="cluster-obstacle"', section)
    assert re.search(r'id="cluster-obstacle">' + re.escape(reason), section)


def test_forged_detach_of_a_non_member_is_a_form_error(world, login):
    vm = world.vm("n1")
    response = login("admin").post(reverse("vms:vm_cluster", args=[vm.pk]), {"action": "detach"})
    assert response.status_code == 422


def test_the_new_controls_speak_english_when_chosen(world, login, settings):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    world.members(cluster, 2)
    client = login("admin")
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    page = body(client.get(url("cluster_members", cluster.pk)))
    for text in (
        "Running members 0/2",
        "Start all members",
        "Attach virtual machines",
        "Start selected",
    ):
        assert text in page
    assert "멤버 모두 시작" not in page
