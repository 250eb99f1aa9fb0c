"""클러스터 검증 and 교체 in Chromium: on the demo's gpu-node-01…04 running as a cluster, the
run judges gpu-node-03 불량 (that row only), 교체 with a spare puts the spare at
gpu-node-03's node_rank in the 정보 tab's torchrun lines.

Tasks run eagerly here (no worker fixture): the simulated agents answer inside the POST, so
the page shows a finished run on its next refresh, as it would a few seconds later live.
"""

import pytest
from playwright.sync_api import expect

from clusters.models import VirtualCluster
from tests.browser.dialogs import confirm
from tests.browser.pages import demo_cluster
from vms.models import VirtualMachine

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]


def running_demo_cluster():
    """gpu-node-01…04 attached in name order (node_rank 0…3), cluster and members 실행중."""
    return demo_cluster("validate-me", NODES, start=True)


def test_validate_finds_gpu_node_03_and_replace_keeps_its_rank(browser_login, live_server):
    page = browser_login("admin")
    cluster = running_demo_cluster()
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    section = page.locator("#validation-section")
    section.get_by_label("중간 진단 (-r 2, 약 2분)").check()
    section.get_by_role("button", name="클러스터 검증").click()
    run = section.locator("article.validation-run").first
    expect(run).to_have_attribute("data-done", "1")
    expect(run.locator('[data-verdict-vm="gpu-node-03"]')).to_contain_text("불량")
    expect(run.locator('[data-verdict-vm="gpu-node-03"]')).to_contain_text("GPU 5")
    expect(run.locator('[data-verdict-vm="gpu-node-03"]')).to_contain_text("mlx5_5")
    for name in ("gpu-node-01", "gpu-node-02", "gpu-node-04"):
        expect(run.locator(f'[data-verdict-vm="{name}"]')).to_contain_text("정상")

    page.get_by_role("tab", name="연결된 가상머신").click()
    rows = page.locator("#tab-body tbody tr")
    expect(rows).to_have_count(4)
    expect(page.locator('tr[data-vm="gpu-node-03"] td.verdict')).to_have_text("불량 교체")
    for name in ("gpu-node-01", "gpu-node-02", "gpu-node-04"):
        expect(page.locator(f'tr[data-vm="{name}"] td.verdict')).to_have_text("정상")
    expect(page.locator("td.verdict", has_text="불량")).to_have_count(1)

    page.locator('tr[data-vm="gpu-node-03"]').get_by_role("link", name="gpu-node-03 교체").click()
    page.get_by_label("gpu-reserved-01").check()
    page.get_by_role("button", name="교체").click()
    confirm(page, says="gpu-node-03을 gpu-reserved-01로 교체합니다")  # 교체 asks first
    expect(page.locator("#operations .op-card.op-done")).to_have_count(1)  # its progress card
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/vms/")
    expect(page.locator('tr[data-vm="gpu-reserved-01"]')).to_contain_text("실행중")
    expect(page.locator('tr[data-vm="gpu-node-03"]')).to_have_count(0)

    page.get_by_role("tab", name="정보").click()
    spare_line = page.locator(".code-block", has_text="gpu-reserved-01")
    expect(spare_line.locator(".code-label")).to_have_text("node_rank=2 · gpu-reserved-01")
    expect(spare_line.locator("code")).to_contain_text("--node_rank=2 ")
    labels = page.locator(".code-label", has_text="node_rank=").all_inner_texts()
    assert labels == [
        "node_rank=0 · gpu-node-01",
        "node_rank=1 · gpu-node-02",
        "node_rank=2 · gpu-reserved-01",
        "node_rank=3 · gpu-node-04",
    ]
    assert VirtualMachine.objects.get(name="gpu-node-03").cluster_id is None
    assert VirtualCluster.objects.get(pk=cluster.pk).members.count() == 4
