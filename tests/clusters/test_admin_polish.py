"""The admin reads as the console does: no "마지막 오류: None", what the user chose before the
walk's bookkeeping, 재해 복구 among a cluster's members, headers as written ("ib_write_bw",
"vCPU 수"), counts in Korean word order, dates as the console writes them."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from clusters.models import ValidationThreshold
from portal.catalog.models import FabricType
from portal.foundation import errors


@pytest.fixture
def root(world, client):
    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    return client


def readonly_rows(page):
    """(label, value) of a change form's read-only fields, in order."""
    return [
        (re.sub(r"<[^>]+>", "", label).strip().rstrip(":"), re.sub(r"<[^>]+>", "", value).strip())
        for label, value in re.findall(
            r"<label>(.*?)</label>\s*<div class=\"readonly\">(.*?)</div>", page, re.S
        )
    ]


def test_a_change_form_shows_no_none_and_the_users_fields_first(world, root):
    cluster = world.cluster("train")
    world.members(cluster, 2)
    page = root.get(reverse("admin:clusters_virtualcluster_change", args=[cluster.pk]))
    rows = dict(readonly_rows(page.content.decode()))
    assert rows["마지막 오류"] == "-"
    assert "None" not in rows.values()
    labels = list(rows)
    assert labels.index("클러스터 이름") < labels.index("세대")
    assert labels.index("생성일") < labels.index("이전 상태")
    assert "재해 복구" in page.content.decode()  # the members inline
    cluster.set_error(errors.NotEnoughMembers())
    cluster.save()
    page = root.get(reverse("admin:clusters_virtualcluster_change", args=[cluster.pk]))
    assert (
        dict(readonly_rows(page.content.decode()))["마지막 오류"]
        == "가상머신 2대 이상이 필요합니다"
    )
    vm = world.vm("lonely")
    page = root.get(reverse("admin:vms_virtualmachine_change", args=[vm.pk]))
    rows = readonly_rows(page.content.decode())
    assert dict(rows)["마지막 오류"] == "-"
    labels = [label for label, _value in rows]
    assert labels.index("이름") < labels.index("사설 IP") < labels.index("상태 변경 시각")
    assert labels.index("재해 복구") < labels.index("사설 IP")


def test_headers_as_written_counts_in_korean_order_and_console_dates(world, root):
    ValidationThreshold.objects.create(
        instance_type=world.h100,
        fabric=FabricType.INFINIBAND,
        ports=8,
        port_gbps=400,
        intra_busbw_gbs=460,
        multi_busbw_gbs=380,
        ib_write_bw_gbps=375,
        source="admin",
    )
    page = root.get(reverse("admin:clusters_validationthreshold_changelist")).content.decode()
    assert ">ib_write_bw 기준(Gb/s, 포트당)<" in page and "Ib_write_bw" not in page
    page = root.get(reverse("admin:catalog_instancetype_changelist")).content.decode()
    assert ">vCPU 수<" in page and "VCPU" not in page
    assert "인스턴스 유형 2개" in page
    world.cluster("one")
    page = root.get(reverse("admin:clusters_virtualcluster_changelist")).content.decode()
    assert "가상 클러스터 1개" in page
    today = timezone.localtime().strftime("%Y-%m-%d")
    assert re.search(rf"{today} \d\d:\d\d<", page), "dates as the console writes them"


def test_the_selection_count_reads_as_korean(world, root):
    world.cluster("one")
    page = root.get(reverse("admin:clusters_virtualcluster_changelist")).content.decode()
    assert "1개 중 0개 선택됨" in page and "아무것도 선택되지 않았습니다" not in page
    script = root.get(reverse("admin:jsi18n")).content.decode()
    assert "%(cnt)s\\uac1c \\uc911 %(sel)s\\uac1c \\uc120\\ud0dd\\ub428" in script or (
        "%(cnt)s개 중 %(sel)s개 선택됨" in script
    )


def test_a_clusters_keys_are_shown_among_the_users_choices_and_never_offered(world, root):
    """The keys are the console's to choose (in the project's own list): the admin shows
    them read-only after the fabric, and offers no key — another project's least of all."""
    from portal.iam import ssh_keys
    from tests.ssh_keys_data import ED25519, ED25519_OTHER

    mine = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="laptop", public_key=ED25519
    )
    ssh_keys.create_ssh_key(
        actor=world.users["other"], project=world.other, name="theirs", public_key=ED25519_OTHER
    )
    cluster = world.cluster("train")
    cluster.ssh_keys.add(mine)
    page = root.get(reverse("admin:clusters_virtualcluster_change", args=[cluster.pk]))
    html = page.content.decode()
    labels = [label for label, _value in readonly_rows(html)]
    assert labels.index("패브릭 타입") < labels.index("SSH 키") < labels.index("상태")
    assert "laptop" in dict(readonly_rows(html))["SSH 키"]
    assert 'name="ssh_keys"' not in html and "theirs" not in html
