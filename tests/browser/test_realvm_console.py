"""The console flow on real guests, once, in Chromium and Korean (markers ``browser`` and
``realvm``): create → attach → 클러스터 시작 → 멤버 모두 시작 → members 실행중 (and running in
libvirt) → 메트릭 with their real CPU figures and the GPU charts saying they report none →
멤버 모두 중지 → 클러스터 중지 → 삭제, leaving no fabric network."""

import io
import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from clusters.models import VirtualCluster
from metrics.models import Sample
from portal.compute.backends.libvirt import names
from tests.browser.dialogs import confirm
from tests.browser.test_console import attach
from tests.realvm.guests import (
    BOOT_SECONDS,
    conn,
    destroy_everything,
    far_ids,
    image_or_skip,
    leftovers,
    use_libvirt,
    wait_for,
)
from vms.models import VirtualMachine

pytestmark = [
    pytest.mark.browser,
    pytest.mark.realvm,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
CLUSTER = "rv-console"
MEMBERS = ("gpu-node-01", "gpu-node-02")
SLOW = 180_000  # ms: TCG guests on a loaded 2-core machine


@pytest.fixture
def real_console(transactional_db, live_server, settings):
    """Ids far from other databases' before the demo is seeded; the libvirt backend."""
    image_or_skip()
    base = far_ids()
    with use_libvirt(settings):
        yield base
        destroy_everything(range(base, base + 1000), range(base, base + 1000))


def all_members(page, button, status):
    """Press the members tab's ``button`` (all of them), confirm, and wait until every
    member's badge says ``status``."""
    page.locator(button).click()
    confirm(page)
    for name in MEMBERS:
        expect(page.locator(f"#tab-body tr[data-vm='{name}'] .badge")).to_have_text(
            status, timeout=SLOW
        )


def test_console_flow_on_real_guests(real_console, browser_login, page, live_server, celery_worker):
    call_command("libvirt_demo_hosts", stdout=io.StringIO())  # this machine as GPU hosts
    browser_login("admin")

    page.locator("a[hx-target='#create-panel']", has_text="가상 클러스터 생성").click()
    form = page.locator("#create-form")
    form.get_by_label("클러스터 이름").fill(CLUSTER)
    form.get_by_label("가용 영역").select_option(label="kr-central-1a")
    form.get_by_label("인스턴스 유형").select_option(
        form.locator("#id_instance_type option", has_text="gpu.h100x8").get_attribute("value")
    )
    form.get_by_label("패브릭 타입").select_option(label="InfiniBand")
    form.get_by_role("button", name="생성").click()
    page.wait_for_url(re.compile(r"/clusters/\d+/$"))
    badge = page.locator("#cluster-header .badge")
    expect(badge).to_have_text("미할당")

    for name in MEMBERS:
        section = attach(page, name, CLUSTER)
        expect(section.get_by_role("status")).to_have_text(f"{CLUSTER} 클러스터에 연결했습니다.")
    section.get_by_role("link", name=CLUSTER).click()
    header = page.locator("#cluster-header")
    header.get_by_role("button", name="클러스터 시작").click()
    confirm(page)
    expect(badge).to_have_text("실행중", timeout=SLOW)

    tab = page.get_by_role("tab", name="연결된 가상머신")
    tab.click()
    all_members(page, "#start-all", "실행중")
    vms = list(VirtualMachine.objects.filter(name__in=MEMBERS))
    c = conn()
    assert all(c.lookupByName(names.domain_name(vm.pk)).isActive() for vm in vms)
    c.close()

    # Their agents report; the 메트릭 tab then draws real CPU and memory, and says the
    # members report no GPU (no zeros).
    wait_for(
        lambda: Sample.objects.filter(vm__in=vms).values("vm").distinct().count() == 2,
        BOOT_SECONDS,
        "a sample from each member",
    )
    metrics = page.get_by_role("tab", name="메트릭")
    metrics.click()
    charts = page.locator("#metrics-charts")
    expect(charts).to_contain_text("멤버가 GPU를 보고하지 않습니다", timeout=SLOW)
    expect(page.locator("[data-metrics-figure='metrics-fig-cpu'] .main-svg").first).to_be_visible()

    tab.click()
    all_members(page, "#stop-all", "중지됨")
    header.get_by_role("button", name="클러스터 중지").click()
    confirm(page)
    expect(badge).to_have_text("종료됨", timeout=SLOW)
    cluster = VirtualCluster.objects.get(name=CLUSTER)
    header.get_by_role("button", name="삭제").click()
    confirm(page)
    page.wait_for_url(re.compile(r"/clusters/$"))
    expect(page.get_by_role("link", name=CLUSTER)).to_have_count(0)
    wait_for(lambda: not leftovers([], [cluster.pk]), 60, "the fabric network to be gone")
    assert names.network_name(cluster.pk) not in leftovers([], [cluster.pk])
