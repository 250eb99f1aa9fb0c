"""A RoCEv2 cluster's help in Chromium, at 1280 and 390 px: its 정보 tab checks the device with
ibv_devinfo and show_gids (not ibstat) and links the RoCE guide, which the help page gives a
section of its own.

``SCREENSHOTS=/some/dir`` saves each page at both widths.
"""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from clusters import services
from clusters.models import ClusterStatus
from portal.catalog.models import FabricType
from tests.browser.pages import demo_placed, shoot
from vms import services as vm_services
from vms.models import VirtualMachine

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FITS = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def running_roce_cluster(name, members):
    admin = get_user_model().objects.get(username="admin")
    placed = {**demo_placed(name, admin), "fabric_type": FabricType.ROCE_V2}
    cluster = services.create_cluster(**placed)
    vms = [VirtualMachine.objects.get(name=vm) for vm in members]
    for vm in vms:
        services.attach_vm(vm.pk, cluster.pk, actor=None)
    services.start_cluster(cluster.pk, actor=None)
    for vm in vms:
        vm_services.start_vm(vm.pk, actor=None)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING
    return cluster


def test_a_roce_cluster_gets_the_roce_commands_and_guide(browser_login, page, live_server):
    cluster = running_roce_cluster("roce-train", ["gpu-node-01", "gpu-node-02"])
    browser_login("viewer")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
        body = page.locator("#tab-body")
        expect(body.get_by_role("heading", name="RoCE 장치 확인")).to_be_visible()
        expect(body.locator("#cmd-device-check")).to_have_text(
            "ibv_devinfo -d mlx5_0\nshow_gids mlx5_0"
        )
        expect(body.get_by_text("ibstat", exact=True)).to_have_count(0)
        expect(body.get_by_text("InfiniBand 장치 확인")).to_have_count(0)
        expect(body.locator("#nccl-env")).to_contain_text("NCCL_IB_GID_INDEX=3")
        assert page.evaluate(FITS)
        shoot(page, "roce-info")
        body.get_by_role("link", name="RoCE 설정 및 벤치마크").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("RoCE 설정 및 벤치마크")
        expect(page.locator("#ib-device-check")).to_contain_text("show_gids")
        assert page.evaluate(FITS)
        shoot(page, "roce-guide")

        page.goto(f"{live_server.url}/clusters/help/")
        page.locator("#help-roce-link").click()
        section = page.locator("#roce")
        expect(section).to_be_in_viewport()
        expect(section.locator("#roce-device-check")).to_contain_text("ibv_devinfo")
        expect(section.locator("#roce-nccl-env")).to_contain_text("NCCL_IB_TC=106")
        assert page.evaluate(FITS)
