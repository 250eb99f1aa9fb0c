"""A 저장 updates everything it changed, in Chromium.

The VM page: 수행할 작업 starts at nothing (the cluster chooser appears once 클러스터에 연결
is chosen); attaching through the 클러스터 section puts the cluster in the header and takes
the 삭제 panel away (a member can't be deleted), detaching brings it back, and a rename in
기본 정보 renames the header, the breadcrumb and the title, all without a reload.

A cluster's 이름 변경 on the 정보 tab does the same for the cluster page: the header, the
breadcrumb, the tab and the title follow; a taken name stays in the form with the rule's
message.
"""

import pytest
from playwright.sync_api import expect

from clusters.models import VirtualCluster
from portal.models import AuditEvent
from tests.browser import pages
from tests.browser.dialogs import confirm
from tests.browser.pages import demo_cluster
from tests.waiting import wait_until
from vms.models import VirtualMachine

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def shoot(page, name):
    """The page after a save at 1280 and 390 px (``SCREENSHOTS``)."""
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        pages.shoot(page, name)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_the_vm_page_follows_its_saves(browser_login, page, live_server):
    cluster = demo_cluster("attach-here")
    vm = VirtualMachine.objects.get(name="gpu-node-01")
    browser_login("admin")
    page.goto(f"{live_server.url}/vms/{vm.pk}/")
    header, section = page.locator("#vm-status"), page.locator("#cluster-section")
    delete = page.get_by_role("button", name="가상머신 삭제")
    action = section.get_by_label("수행할 작업")
    chooser = section.get_by_label("연결할 클러스터")
    expect(delete).to_be_visible()
    expect(action).to_have_value("")  # nothing chosen
    expect(chooser).to_be_hidden()

    action.select_option("attach")
    expect(chooser).to_be_visible()
    chooser.select_option(label="attach-here")
    section.get_by_role("button", name="클러스터 저장").click()
    expect(section.locator(".alert-success")).to_have_text("attach-here 클러스터에 연결했습니다.")
    expect(header.locator(".subtitle")).to_contain_text("클러스터 attach-here")
    # A member is detached before it can be deleted: the button says so, disabled.
    expect(delete).to_be_disabled()
    expect(page.locator("#vm-delete-reason")).to_have_text(
        "클러스터에 연결된 가상머신은 먼저 클러스터에서 분리해야 합니다"
    )
    expect(action).to_have_value("")
    shoot(page, "vm-edit-attached")

    action.select_option("detach")
    section.get_by_role("button", name="클러스터 저장").click()
    confirm(page)  # 분리 asks first (the console's one dialog)
    expect(section.locator(".alert-success")).to_have_text("클러스터에서 분리했습니다.")
    expect(header.locator(".subtitle")).not_to_contain_text("attach-here")
    expect(delete).to_be_enabled()
    assert VirtualMachine.objects.get(pk=vm.pk).cluster_id is None
    assert cluster.pk  # untouched

    page.locator("#basics").get_by_label("이름").fill("gpu-node-renamed")
    page.get_by_role("button", name="기본 정보 저장").click()
    expect(header.locator("h1")).to_have_text("gpu-node-renamed")
    expect(page.locator("#crumb-name")).to_have_text("gpu-node-renamed")
    expect(page).to_have_title("gpu-node-renamed · 가상머신 · GPU 클라우드 콘솔")


def test_a_save_without_an_action_changes_nothing(browser_login, page, live_server):
    demo_cluster("attach-here")
    vm = VirtualMachine.objects.get(name="gpu-node-01")
    browser_login("admin")
    page.goto(f"{live_server.url}/vms/{vm.pk}/")
    section = page.locator("#cluster-section")
    section.get_by_role("button", name="클러스터 저장").click()
    # The browser asks for the action (a required field) and sends nothing.
    assert section.get_by_label("수행할 작업").evaluate("el => el.validity.valueMissing")
    expect(section.locator(".alert-success")).to_have_count(0)
    expect(page.get_by_role("button", name="가상머신 삭제")).to_be_visible()
    assert VirtualMachine.objects.get(pk=vm.pk).cluster_id is None


def test_renaming_a_cluster_on_its_info_tab(browser_login, page, live_server):
    cluster = demo_cluster("before")
    demo_cluster("taken")
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    rename = page.locator("#cluster-rename")
    rename.get_by_text("이름 변경").click()
    field = rename.get_by_label("새 이름")
    field.fill("taken")
    rename.get_by_role("button", name="저장").click()
    expect(page.locator("#rename-error")).to_have_text(
        "이 프로젝트에 같은 이름의 클러스터가 이미 있습니다"
    )
    expect(page.locator("#cluster-header h1")).to_have_text("before")

    page.locator("#cluster-rename").get_by_label("새 이름").fill("after")
    page.locator("#cluster-rename").get_by_role("button", name="저장").click()
    expect(page.locator("#cluster-header h1")).to_have_text("after")
    expect(page.locator("#crumb-name")).to_have_text("after")
    expect(page.locator("#info-name")).to_have_text("after")
    expect(page).to_have_title("after · 가상 클러스터 · GPU 클라우드 콘솔")
    page.locator("#cluster-rename summary").click()
    shoot(page, "cluster-renamed")
    assert VirtualCluster.objects.get(pk=cluster.pk).name == "after"
    outcomes = list(
        AuditEvent.objects.filter(action="cluster.update", target_id=cluster.pk)
        .order_by("at", "id")
        .values_list("outcome", "message")
    )
    assert outcomes == [("REFUSED", ""), ("SUCCEEDED", "before → after")]


def test_a_cluster_change_redraws_the_info_tab_with_one_request_each(
    browser_login, page, live_server
):
    """cluster-changed (a poll saw a change, an action was taken): the header and the 정보
    tab ask once each, and the tab's 검증 section comes with the tab, not also on its own
    (which the tab's redraw would throw away)."""
    cluster = demo_cluster("redraw-once", ("gpu-node-01", "gpu-node-02"))
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    expect(page.locator("#validation-section h3")).to_have_text("검증")
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    asked = []
    page.on("request", lambda r: asked.append(r.url.removeprefix(live_server.url).split("?")[0]))
    page.locator("#validation-section").evaluate("e => e.setAttribute('data-old', '')")
    page.evaluate("htmx.trigger(document.body, 'cluster-changed')")
    expect(page.locator("#validation-section h3")).to_have_text("검증")
    expect(page.locator("#validation-section[data-old]")).to_have_count(0)
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    base = f"/clusters/{cluster.pk}/"
    assert sorted(asked) == sorted([f"{base}header/", base, f"{base}validation/"])


def test_a_tab_opened_while_the_panel_refreshes_wins_and_nothing_is_aborted(
    browser_login, page, live_server
):
    """The 정보 tab is refreshing when 연결된 가상머신 is opened, and the refresh answers
    first: the members tab still shows (the refresh, swapped in, would have left the tab's
    answer no panel), and the page logs no error (aborting the refresh made htmx log two;
    the ``page`` fixture fails on them)."""
    cluster = demo_cluster("late-refresh", ("gpu-node-01", "gpu-node-02"))
    browser_login("admin")
    base = f"{live_server.url}/clusters/{cluster.pk}/"
    page.goto(base)
    expect(page.locator("#validation-section h3")).to_have_text("검증")
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    held = {}

    def hold(route):
        path = route.request.url.removeprefix(base)
        if route.request.headers.get("hx-request") and path in ("", "vms/"):
            held[path] = route
        else:
            route.continue_()

    page.route(f"{base}**", hold)
    page.evaluate("htmx.trigger(document.body, 'cluster-changed')")
    page.wait_for_function("() => document.querySelector('#tab-panel.htmx-request')")
    page.get_by_role("tab", name="연결된 가상머신").click()
    # Both requests are held once their route handlers have run here, which Playwright
    # dispatches while it is called (a short wait on the page lets it).
    wait_until(
        lambda: page.wait_for_timeout(20) or {"", "vms/"} <= set(held),
        timeout=10,
        what="the refresh and the tab's request held",
    )

    held[""].continue_()  # the refresh answers first, and htmx has taken its answer
    page.wait_for_function("() => !document.querySelector('#tab-panel.htmx-request')")
    held["vms/"].continue_()
    panel = page.locator("#tab-panel")
    expect(panel).to_have_attribute("data-tab", "members")
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    expect(panel).to_have_attribute("data-tab", "members")
    members_tab = page.get_by_role("tab", name="연결된 가상머신")
    expect(members_tab).to_have_attribute("aria-selected", "true")
    page.unroute(f"{base}**")
    # Once the tab has answered, the panel's own refreshes are swapped in again.
    panel.evaluate("e => e.setAttribute('data-old', '')")
    page.evaluate("htmx.trigger(document.body, 'cluster-changed')")
    expect(page.locator("#tab-panel[data-old]")).to_have_count(0)
    expect(panel).to_have_attribute("data-tab", "members")
