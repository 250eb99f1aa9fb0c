"""The product page's statements where a person deciding and creating reads them, in Chromium
at 1280 and 390 px: 사용 사례 under the empty cluster list and on the help page, 1단계's
description under each field of cluster create, and the start refusal of a cluster with no
member in the rule's own sentence; the help page's sections of the three steps and the detail
page's tabs, and the guide's InfiniBand 사용 example. In English too, once.

``SCREENSHOTS=/some/dir`` saves each page at both widths.
"""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.pages import shoot, switch_language

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 390)
FITS = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
USE_CASES = {
    "ko": ["대규모 LLM 사전학습", "멀티노드 파인튜닝", "HPC 과학 계산"],
    "en": ["Large-scale LLM pre-training", "Multi-node fine-tuning", "HPC scientific computing"],
}
FIELD_HELP = {
    "ko": {
        "클러스터 이름": "식별 이름",
        "가용 영역": "클러스터가 배치될 영역",
        "인스턴스 유형": "클러스터 멤버에 사용할 인스턴스 유형",
        "패브릭 타입": "InfiniBand 또는 Ethernet(RoCEv2)",
    },
    "en": {
        "Cluster name": "An identifying name",
        "Availability zone": "The zone the cluster is placed in",
        "Instance type": "The instance type the cluster's members use",
        "Fabric type": "InfiniBand or Ethernet (RoCEv2)",
    },
}
NOT_ENOUGH = {"ko": "가상머신 2대 이상이 필요합니다", "en": "At least 2 virtual machines"}
# The help page's sections of the product page's steps and tabs: (id, heading, a statement).
GUIDE = {
    "ko": [
        ("#step-create", "1단계: 클러스터 생성", "우측 상단 가상 클러스터 생성 버튼을 클릭합니다."),
        ("#step-attach", "2단계: 가상머신 연결", "분리할 때는 같은 화면에서 클러스터에서 분리를"),
        ("#attachable", "연결 가능 상태", "가상머신은 중지됨 상태일 때만 클러스터에 연결할"),
        ("#step-start", "3단계: 클러스터 시작", '포털에 "가상머신 2대 이상이 필요합니다" 안내가'),
        ("#detail-tabs", "클러스터 상세 페이지", "클러스터 단위 GPU·CPU·네트워크·메모리 사용량"),
    ],
    "en": [
        ("#step-create", "Step 1: Create a cluster", "Create virtual cluster button at the top"),
        ("#step-attach", "Step 2: Attach virtual machines", "choose Detach from cluster"),
        ("#attachable", "When a VM can be attached", "only while it is Stopped"),
        ("#step-start", "Step 3: Start the cluster", "At least 2 virtual machines are required"),
        ("#detail-tabs", "Cluster detail page", "GPU, CPU, network and memory usage"),
    ],
}
USAGE = {"ko": ("InfiniBand 사용", "<마스터-VM-IP>"), "en": ("Using InfiniBand", "<master-VM-IP>")}


def choose(page, label, text):
    """Choose the option of the select labelled ``label`` whose text has ``text``."""
    select = page.get_by_label(label, exact=True)
    option = select.locator("option", has_text=text)
    expect(option).to_have_count(1)
    select.select_option(value=option.get_attribute("value"))


def described_by(page, label):
    """The text of what the control labelled ``label`` names as its description."""
    control = page.get_by_label(label, exact=True)
    ids = control.get_attribute("aria-describedby") or ""
    return " ".join(page.locator(f"#{i}").inner_text() for i in ids.split())


def test_use_cases_field_help_and_the_empty_start_refusal(browser_login, page, live_server):
    browser_login("admin")
    for language in ("ko", "en"):
        if language == "en":
            switch_language(page, "en")
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            # The demo project has no cluster yet: the empty list says what one is for.
            page.goto(f"{live_server.url}/clusters/")
            empty = page.locator("#cluster-table .empty-body")
            for use in USE_CASES[language]:
                expect(empty.get_by_text(use)).to_be_visible()
            expect(empty.locator("#empty-create")).to_be_visible()
            assert page.evaluate(FITS), f"the empty list scrolls sideways at {width} px"
            shoot(page, "clusters-empty")
            page.goto(f"{live_server.url}/clusters/help/")
            section = page.locator("#use-cases")
            expect(section.get_by_role("heading", level=2)).to_be_visible()
            for use in USE_CASES[language]:
                expect(section.get_by_text(use)).to_be_visible()
            assert page.evaluate(FITS), f"the help page scrolls sideways at {width} px"
            # Each field of cluster create says what it is, under it, and names it so.
            page.goto(f"{live_server.url}/clusters/new/")
            for label, text in FIELD_HELP[language].items():
                assert text in described_by(page, label), label
                field = page.locator(".field", has=page.get_by_label(label, exact=True))
                expect(field).to_contain_text(text)
            assert page.evaluate(FITS), f"cluster create scrolls sideways at {width} px"
            shoot(page, "cluster-create")

    switch_language(page, "ko")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/clusters/new/")
    page.get_by_label("클러스터 이름", exact=True).fill("empty-one")
    choose(page, "가용 영역", "kr-central-1a")
    choose(page, "인스턴스 유형", "gpu.h100x8")
    choose(page, "패브릭 타입", "InfiniBand")
    page.get_by_role("button", name="생성", exact=True).click()
    page.wait_for_url(re.compile(r"/clusters/\d+/$"))
    header = page.locator("#cluster-header")
    expect(header.locator(".badge")).to_have_text("미할당")
    for language in ("ko", "en"):
        if language == "en":
            switch_language(page, "en")
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.reload()
            start = header.locator("form button[type=submit]").first
            expect(start).to_be_disabled()
            reason = header.locator("#start-reason")
            expect(reason).to_be_visible()
            expect(reason).to_contain_text(NOT_ENOUGH[language])
            expect(start).to_have_attribute("aria-describedby", "start-reason")
            expect(header.locator("#callout-empty")).to_be_visible()
            shoot(page, "cluster-empty-start")


def test_the_steps_and_the_usage_example_read_on_a_desktop_and_a_phone(
    browser_login, page, live_server
):
    browser_login("admin")
    for language in ("ko", "en"):
        if language == "en":
            switch_language(page, "en")
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(f"{live_server.url}/clusters/help/")
            for section_id, heading, statement in GUIDE[language]:
                section = page.locator(section_id)
                expect(section.get_by_role("heading", level=2)).to_have_text(heading)
                expect(section).to_contain_text(statement)
                expect(section).to_be_visible()
            assert page.evaluate(FITS), f"the help page scrolls sideways at {width} px"
            shoot(page, "help-steps")
            page.goto(f"{live_server.url}/clusters/help/infiniband/")
            usage = page.locator("#usage")
            title, placeholder = USAGE[language]
            expect(usage.get_by_role("heading", level=2)).to_have_text(title)
            example = usage.locator("#ib-usage-example")
            expect(example).to_be_visible()
            expect(example).to_contain_text("torchrun --nproc_per_node=8 --nnodes=4")
            expect(example).to_contain_text(f"--master_addr={placeholder}")
            assert page.evaluate(FITS), f"the guide scrolls sideways at {width} px"
            shoot(page, "ib-usage")
