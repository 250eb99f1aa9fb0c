"""Reasons instead of silence: an action a user may not take now is shown disabled with why
(a missing permission by name), never left out; the 교체 page reached by its URL without the
permission says so; 가상머신 연결 during a start is disabled with the rule that refuses it."""

import re

import pytest
from django.urls import reverse

from clusters.models import ClusterStatus
from portal.foundation import errors
from tests.pages import body
from vms.models import VmStatus


def url(name, pk, app="clusters"):
    return reverse(f"{app}:{name}", args=[pk])


def disabled_with(page, label, reason_id):
    """The disabled button ``label`` names ``reason_id``; that element's text."""
    button = re.search(rf"<button[^>]*>{re.escape(label)}</button>", page)
    assert button is not None, f"no {label} button"
    assert "disabled" in button.group(0) and f'aria-describedby="{reason_id}"' in button.group(0)
    reason = re.search(rf'id="{reason_id}"[^>]*>([^<]*)<', page)
    assert reason is not None, f"no #{reason_id}"
    return reason.group(1)


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        ("viewer", {"start": "UPDATE", "delete": "DELETE"}),
        ("operator", {"delete": "DELETE"}),
    ],
)
def test_the_header_shows_what_the_role_may_not_do_and_why(world, login, role, expected):
    cluster = world.cluster("train")
    world.members(cluster, 2)
    page = body(login(role).get(url("cluster_detail", cluster.pk)))
    reasons = {
        "start": disabled_with(page, "클러스터 시작", "start-reason")
        if "start" in expected
        else None,
        "delete": disabled_with(page, "삭제", "delete-reason"),
    }
    for action, perm in expected.items():
        assert reasons[action] == f"권한 없음: Resource.VirtualCluster.{perm}"
    if "start" not in expected:  # the operator may start: the button is live
        assert re.search(
            r'<button type="submit" class="btn btn-primary">클러스터 시작</button>', page
        )


def test_a_viewer_sees_rename_disabled_with_why(world, login):
    cluster = world.cluster("train")
    page = body(login("viewer").get(url("cluster_detail", cluster.pk)))
    assert disabled_with(page, "이름 변경", "rename-reason") == (
        "권한 없음: Resource.VirtualCluster.UPDATE"
    )
    assert url("cluster_rename", cluster.pk) not in page


def test_the_delete_refused_by_members_running_is_a_sentence(world, login):
    cluster = world.cluster("train", status=ClusterStatus.TERMINATED)
    world.members(cluster, 2, status=VmStatus.RUNNING)
    page = body(login("admin").get(url("cluster_detail", cluster.pk)))
    assert disabled_with(page, "삭제", "delete-reason") == (
        f"클러스터를 삭제할 수 없습니다. {errors.MembersStillRunning().message}"
    )


def test_the_replace_page_without_the_permission_says_so_not_no_spare(world, login):
    cluster = world.cluster("train", status=ClusterStatus.RUNNING)
    member, _other = world.members(cluster, 2)
    world.vm("spare")  # a spare exists: only the permission refuses
    target = f"{url('member_replace', cluster.pk)}?member={member.pk}"
    page = body(login("viewer").get(target))
    assert disabled_with(page, "교체", "replace-reason") == (
        "권한 없음: Resource.VirtualMachine.UPDATE"
    )
    assert "연결할 수 있는 예비 가상머신이 없습니다" not in page and 'name="spare"' not in page
    page = body(login("admin").get(target))
    assert 'name="spare"' in page and 'id="replace-reason"' not in page


def test_attach_is_disabled_while_the_cluster_starts(world, login):
    cluster = world.cluster("train", status=ClusterStatus.PROVISIONING)
    world.members(cluster, 2)
    page = body(login("admin").get(url("cluster_members", cluster.pk)))
    assert disabled_with(page, "가상머신 연결", "attach-reason") == (
        errors.ClusterChanging().message
    )
    assert url("cluster_attach", cluster.pk) not in page


def test_the_vm_page_shows_what_the_role_may_not_do(world, login):
    vm = world.vm("lonely")
    page = body(login("operator").get(url("vm_edit", vm.pk, app="vms")))
    assert disabled_with(page, "가상머신 삭제", "vm-delete-reason") == (
        "권한 없음: Resource.VirtualMachine.DELETE"
    )
    page = body(login("viewer").get(url("vm_edit", vm.pk, app="vms")))
    assert disabled_with(page, "시작", "vm-update-reason") == (
        "권한 없음: Resource.VirtualMachine.UPDATE"
    )
    assert url("vm_start", vm.pk, app="vms") not in page
