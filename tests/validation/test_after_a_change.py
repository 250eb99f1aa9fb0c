"""Nothing stale after a change (issue 41, item 3): after a 교체 the replace page says the
member was replaced and by whom, offering no spare; the latest 검증 is marked as older than
the members the cluster has now, naming who left and who joined unjudged, and suggests
validating again; a failed start's error goes with the members it spoke of; a member whose
metrics the simulator writes is not told it has no token; a run in progress is said as what
it is, not as the refusal of a second one."""

import pytest
from django.urls import reverse
from django.utils import translation

from clusters import operations, services
from clusters.models import ClusterStatus
from portal.compute.backends.simulator import SimulatorBackend
from portal.foundation.errors import CapacityUnavailable
from vms.models import BillingType, VirtualMachine, VmStatus


@pytest.fixture(autouse=True)
def _korean():
    with translation.override("ko"):
        yield


def replace_url(cluster, member):
    return reverse("clusters:member_replace", args=[cluster.pk]) + f"?member={member.pk}"


def validated(world, cluster, capture):
    with capture(execute=True):
        operation = operations.start_validation(cluster.pk, actor=world.admin)
    operation.refresh_from_db()
    assert operation.done
    return operation


def replaced(world, cluster, capture, name="gpu-node-03", spare_name="gpu-spare-01"):
    member = VirtualMachine.objects.get(name=name)
    spare = world.vm(spare_name, billing_type=BillingType.RESERVED)
    with capture(execute=True):
        operation = operations.replace_member(cluster.pk, member.pk, spare.pk, actor=world.admin)
    operation.refresh_from_db()
    assert operation.done and operation.last_error is None
    return member, spare, operation


def test_the_replace_page_after_its_replace_says_what_took_the_place_and_offers_nothing(
    world, login, running, django_capture_on_commit_callbacks
):
    validated(world, running, django_capture_on_commit_callbacks)
    member, _spare, _operation = replaced(world, running, django_capture_on_commit_callbacks)
    page = login("admin").get(replace_url(running, member)).content.decode()
    assert 'id="replace-done"' in page and "교체 완료" in page
    assert "gpu-node-03은 이 클러스터에서 분리되었고, gpu-spare-01이 그 자리" in page
    assert 'id="replace-form"' not in page and 'name="spare"' not in page
    assert "클러스터 검증을 다시 실행하세요" in page


def test_the_replace_page_of_a_vm_never_in_the_cluster_is_not_found(world, login, running):
    stranger = world.vm("stranger")
    assert login("admin").get(replace_url(running, stranger)).status_code == 404


def test_while_a_replace_runs_its_page_offers_no_second_one(world, login, running, monkeypatch):
    """The member is stopping for the 교체 (its VM step not run yet): the page says so and
    교체 is disabled."""
    monkeypatch.setattr("clusters.operations.replace.publish", lambda *a, **k: None)
    member = VirtualMachine.objects.get(name="gpu-node-03")
    spare = world.vm("gpu-spare-01", billing_type=BillingType.RESERVED)
    operations.replace_member(running.pk, member.pk, spare.pk, actor=world.admin)
    page = login("admin").get(replace_url(running, member)).content.decode()
    assert 'id="replace-running"' in page and "교체가 진행 중입니다" in page
    assert 'id="replace-submit" disabled' in page
    assert 'data-spare="gpu-spare-01"' not in page  # held by the running 교체


def test_a_replace_card_explains_its_two_items(world, running, django_capture_on_commit_callbacks):
    from clusters import outcome

    _member, _spare, operation = replaced(world, running, django_capture_on_commit_callbacks)
    counts = operation.items.aggregate(**outcome.item_counts())
    assert outcome.describe(operation, **counts).text == "교체 완료: gpu-node-03 → gpu-spare-01"


def test_the_latest_validation_is_marked_older_than_the_members_after_a_replace(
    world, login, running, django_capture_on_commit_callbacks
):
    validated(world, running, django_capture_on_commit_callbacks)
    section_url = reverse("clusters:validation_section", args=[running.pk])
    client = login("admin")
    before = client.get(section_url).content.decode()
    assert "이전 멤버 구성" not in before and 'data-older="1"' not in before
    replaced(world, running, django_capture_on_commit_callbacks)
    after = client.get(section_url).content.decode()
    assert 'data-older="1"' in after and "이전 멤버 구성" in after
    assert "분리: gpu-node-03" in after and "연결(검증 안 됨): gpu-spare-01" in after
    assert "클러스터 검증을 다시 실행하세요" in after
    row = after.split('data-verdict-vm="gpu-node-03"')[1].split("</tr>")[0]
    assert "지금은 멤버 아님" in row and "교체</a>" not in row
    members = client.get(reverse("clusters:cluster_members", args=[running.pk])).content.decode()
    spare_row = members.split('data-vm="gpu-spare-01"')[1].split("</tr>")[0]
    assert "검증 안 됨" in spare_row
    kept_row = members.split('data-vm="gpu-node-01"')[1].split("</tr>")[0]
    assert "정상" in kept_row and "검증 안 됨" not in kept_row


def test_a_validation_of_the_members_as_they_are_is_not_marked(
    world, login, running, django_capture_on_commit_callbacks
):
    validated(world, running, django_capture_on_commit_callbacks)
    replaced(world, running, django_capture_on_commit_callbacks)
    running.members.update(status=VmStatus.RUNNING)
    validated(world, running, django_capture_on_commit_callbacks)
    page = (
        login("admin")
        .get(reverse("clusters:validation_section", args=[running.pk]))
        .content.decode()
    )
    newest, older = page.split('class="validation-run')[1:3]
    assert "data-older" not in newest.split(">")[0] and "이전 멤버 구성" not in newest
    assert 'data-older="1"' in older  # the run before the 교체 stays marked
    assert "다시 실행하세요" not in page  # the suggestion only when the latest is older


def test_a_run_in_progress_is_said_as_such_to_who_started_it(world, login, running, monkeypatch):
    monkeypatch.setattr(SimulatorBackend, "emits_metrics", False)  # nobody answers: it stays open
    client = login("admin")
    start = reverse("clusters:validation_start", args=[running.pk])
    page = client.post(start, {"level": "1"}, HTTP_HX_REQUEST="true").content.decode()
    assert "이미 진행 중" not in page
    assert "admin이 " in page and "시작한 검증이 진행 중입니다" in page
    assert "disabled" in page.split("클러스터 검증</button>")[0].rsplit("<button", 1)[1]


def test_a_failed_starts_error_goes_when_the_members_change(world, login):
    world.capacity(1)
    cluster = world.cluster("short")
    first, second = world.members(cluster, 2)
    cluster.set_error(CapacityUnavailable())
    cluster.save(update_fields=["error_code", "error_params"])
    client = login("admin")
    assert "마지막 오류" in client.get(f"/clusters/{cluster.pk}/").content.decode()
    services.detach_vm(second.pk, actor=world.admin)
    cluster.refresh_from_db()
    assert cluster.error_code == ""
    assert "마지막 오류" not in client.get(f"/clusters/{cluster.pk}/").content.decode()
    cluster.set_error(CapacityUnavailable())
    cluster.save(update_fields=["error_code", "error_params"])
    services.attach_vm(second.pk, cluster.pk, actor=world.admin)
    cluster.refresh_from_db()
    assert cluster.error_code == "" and cluster.status == ClusterStatus.UNALLOCATED


def test_a_member_whose_metrics_the_simulator_writes_is_not_told_it_has_no_token(
    world, login, running
):
    from metrics import simulate

    simulate.emit_samples()
    member = running.members.first()
    page = login("admin").get(f"/vms/{member.pk}/").content.decode()
    assert "발급된 토큰이 없습니다" not in page
    assert 'id="metrics-simulated"' in page and "마지막 수신:" in page


def test_without_a_simulator_no_token_is_still_said(world, login, running, monkeypatch):
    monkeypatch.setattr(SimulatorBackend, "emits_metrics", False)
    member = running.members.first()
    page = login("admin").get(f"/vms/{member.pk}/").content.decode()
    assert "발급된 토큰이 없습니다" in page and 'id="metrics-simulated"' not in page
