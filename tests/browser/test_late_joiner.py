"""After a 교체, in Chromium: the spare that started two minutes ago is 방금 합류, never the
slowest member; the replaced member's samples are still in the heatmap, marked 교체됨; and
the next 교체's spare list shows the replaced VM's 불량 verdict with nothing pre-selected."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from clusters.models import ClusterStatus, Operation, OperationItem, VirtualCluster
from clusters.models.validation import ValidationRun, ValidationVerdict, Verdict
from metrics import simulate
from portal.catalog.models import FabricType
from portal.models import Project
from tests.browser.dialogs import cancel, confirm_dialog
from vms.models import VirtualMachine, VmStatus

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
NODES = ("gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04")
SPARE = "gpu-reserved-01"


@pytest.fixture
def replaced(demo):
    """The demo's four nodes ran ten minutes; 검증 judged gpu-node-03 불량; 교체 put
    gpu-reserved-01 in its place two minutes ago (states written as the services leave
    them, samples as the simulator's ten-second ticks)."""
    vms = {vm.name: vm for vm in VirtualMachine.objects.filter(name__in=(*NODES, SPARE))}
    first = vms[NODES[0]]
    cluster = VirtualCluster.objects.create(
        project=Project.objects.get(slug="demo"),
        name="train-demo",
        zone_id=first.zone_id,
        instance_type_id=first.instance_type_id,
        fabric_type=FabricType.INFINIBAND,
        status=ClusterStatus.RUNNING,
    )
    now = timezone.now()
    for rank, name in enumerate(NODES):
        VirtualMachine.objects.filter(pk=vms[name].pk).update(
            cluster=cluster,
            node_rank=rank,
            status=VmStatus.RUNNING,
            status_changed_at=now - timedelta(minutes=15),
        )
    for i in range(60, 12, -1):
        simulate.emit_samples(now - timedelta(seconds=10 * i))
    check = Operation.objects.create(
        kind=Operation.Kind.VALIDATE,
        project=cluster.project,
        cluster=cluster,
        finished_at=now - timedelta(minutes=3),
    )
    run = ValidationRun.objects.create(operation=check, finished_at=now - timedelta(minutes=3))
    for name in NODES:
        ValidationVerdict.objects.create(
            run=run,
            vm=vms[name],
            vm_name=name,
            verdict=Verdict.BAD if name == "gpu-node-03" else Verdict.OK,
        )
    VirtualMachine.objects.filter(pk=vms["gpu-node-03"].pk).update(
        cluster=None, node_rank=None, status=VmStatus.STOPPED
    )
    VirtualMachine.objects.filter(pk=vms[SPARE].pk).update(
        cluster=cluster,
        node_rank=2,
        status=VmStatus.RUNNING,
        status_changed_at=now - timedelta(seconds=125),
    )
    swap = Operation.objects.create(
        kind=Operation.Kind.REPLACE,
        project=cluster.project,
        cluster=cluster,
        finished_at=now - timedelta(minutes=2),
    )
    OperationItem.objects.create(
        operation=swap,
        position=0,
        vm=vms["gpu-node-03"],
        target_name="gpu-node-03",
        finished_at=swap.finished_at,
        status=OperationItem.Status.SUCCEEDED,
    )
    for i in range(12, 0, -1):
        simulate.emit_samples(now - timedelta(seconds=10 * i))
    return cluster


def test_after_a_replace_the_late_spare_is_just_joined_and_the_bad_vm_is_marked(
    replaced, browser_login, page, live_server
):
    browser_login("admin")
    page.goto(live_server.url + reverse("clusters:cluster_metrics", args=[replaced.pk]))
    # The straggler was replaced and the members left are healthy: none is named in its place.
    expect(page.locator("#metrics-straggler")).to_contain_text("느린 멤버 없음")
    expect(page.locator("#metrics-straggler")).not_to_contain_text("가장 느린 멤버:")
    expect(page.locator("#metrics-straggler")).not_to_contain_text(SPARE)
    expect(page.locator("#metrics-straggler")).not_to_contain_text("gpu-node-03")
    expect(page.locator("#metrics-joined")).to_contain_text(f"방금 합류 {SPARE}")
    expect(page.locator("#metrics-replaced")).to_contain_text("교체됨 gpu-node-03")
    heatmap = page.locator("[data-metrics-figure='metrics-fig-heatmap'].js-plotly-plot")
    expect(heatmap).to_contain_text("gpu-node-03 (교체됨)")
    expect(heatmap).to_contain_text(f"{SPARE} (방금 합류)")
    expect(page.locator(".metrics-bottom-table")).not_to_contain_text(SPARE)

    member = VirtualMachine.objects.get(name="gpu-node-01")
    page.goto(
        live_server.url
        + reverse("clusters:member_replace", args=[replaced.pk])
        + f"?member={member.pk}"
    )
    row = page.locator("[data-spare='gpu-node-03']")
    expect(row).to_contain_text("최근 검증: 불량")
    expect(row).to_contain_text("주의")
    expect(page.locator("input[name=spare]:checked")).to_have_count(0)
    row.locator("input").check()
    page.locator("#replace-submit").click()
    dialog = confirm_dialog(page)
    expect(dialog.locator("#confirm-title")).to_have_text(
        "gpu-node-01을 gpu-node-03으로 교체합니다"
    )
    cancel(page)
    expect(page.locator("#operations .op-card")).to_have_count(0)
    assert not Operation.objects.filter(kind=Operation.Kind.REPLACE, items__vm=member).exists()
