"""Choosing SSH keys for a cluster in Chromium, in Korean at 1280 px: a key ticked on the
create form is the cluster's, the 정보 tab lists it and says when it applies, and SSH 키
변경 replaces it in place."""

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from clusters.models import VirtualCluster
from portal.iam import ssh_keys
from portal.models import Project
from tests.ssh_keys_data import (
    ED25519,
    ED25519_FINGERPRINT,
    ED25519_OTHER,
    ED25519_OTHER_FINGERPRINT,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NAME = "keyed-cluster"
APPLIES = "변경은 각 멤버가 다음에 시작할 때 적용됩니다."


def register(name, key):
    admin = get_user_model().objects.get(username="admin")
    project = Project.objects.get(name="demo")
    return ssh_keys.create_ssh_key(actor=admin, project=project, name=name, public_key=key)


def test_a_key_chosen_at_create_is_the_clusters_and_the_info_tab_changes_it(
    browser_login, page, live_server
):
    laptop, desktop = register("laptop", ED25519), register("desktop", ED25519_OTHER)
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/new/")
    form = page.locator("#create-form")
    keys = form.locator("#cluster-ssh-keys")
    expect(keys.locator("legend")).to_have_text("SSH 키")
    expect(keys).to_contain_text("각 멤버가 다음에 시작할 때 적용됩니다.")
    form.get_by_label("클러스터 이름").fill(NAME)
    form.get_by_label("가용 영역").select_option(label="kr-central-1a")
    kind = form.get_by_label("인스턴스 유형")  # "gpu.h100x8 · 8× NVIDIA H100 SXM · …"
    kind.select_option(kind.locator("option", has_text="gpu.h100x8 ").get_attribute("value"))
    form.get_by_label("패브릭 타입").select_option(label="InfiniBand")
    box = keys.get_by_label(f"laptop ({ED25519_FINGERPRINT})")
    box.check()
    expect(box).to_be_checked()
    expect(keys.get_by_label(f"desktop ({ED25519_OTHER_FINGERPRINT})")).not_to_be_checked()
    # The block fits the form at this width: nothing scrolls sideways.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    form.get_by_role("button", name="생성").click()
    page.wait_for_url(re.compile(r"/clusters/\d+/$"))

    cluster = VirtualCluster.objects.get(name=NAME)
    assert list(cluster.ssh_keys.all()) == [laptop]
    shown = page.locator("#cluster-keys")
    expect(shown.locator("#cluster-keys-chosen")).to_have_text(f"laptop {ED25519_FINGERPRINT}")
    expect(shown.locator("#cluster-keys-note")).to_contain_text(APPLIES)

    shown.get_by_text("SSH 키 변경").click()
    change = page.locator("#cluster-keys-change form")
    change.get_by_label(f"laptop ({ED25519_FINGERPRINT})").uncheck()
    change.get_by_label(f"desktop ({ED25519_OTHER_FINGERPRINT})").check()
    change.get_by_role("button", name="저장").click()
    chosen = page.locator("#cluster-keys-chosen")
    expect(chosen).to_have_text(f"desktop {ED25519_OTHER_FINGERPRINT}")
    expect(page.locator(".toasts")).to_contain_text("클러스터의 SSH 키를 바꿨습니다")
    assert list(cluster.ssh_keys.all()) == [desktop]
