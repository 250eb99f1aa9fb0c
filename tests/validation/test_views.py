"""The 검증 section, the verdict column with 교체 on 불량, raw output on demand and the
replace page, through the test client."""

from django.urls import reverse

from clusters import operations
from clusters.models import Operation, ValidationJob
from vms.models import VirtualMachine, VmStatus


def test_the_button_runs_a_validation_and_the_section_shows_it(
    login, world, running, django_capture_on_commit_callbacks
):
    client = login("operator")
    section = client.get(reverse("clusters:validation_section", args=[running.pk]))
    assert "클러스터 검증" in section.text and "disabled" not in section.text
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("clusters:validation_start", args=[running.pk]),
            {"level": "1"},
            headers={"HX-Request": "true"},
        )
    assert response.status_code == 200
    page = client.get(reverse("clusters:validation_section", args=[running.pk])).text
    assert 'data-done="1"' in page and "mlx5_5" in page and "GPU 5" in page
    assert page.count('data-verdict="BAD"') == 1 and page.count('data-verdict="OK"') == 3
    members = client.get(reverse("clusters:cluster_members", args=[running.pk])).text
    bad = VirtualMachine.objects.get(name="gpu-node-03")
    replace_url = reverse("clusters:member_replace", args=[running.pk]) + f"?member={bad.pk}"
    assert members.count(replace_url) == 1  # 교체 offered on the 불량 row only
    assert page.count(replace_url) == 1  # and on its verdict in the 검증 section
    job = ValidationJob.objects.filter(kind="ib_client", vm_name="gpu-node-03").get()
    raw = client.get(reverse("clusters:validation_raw", args=[running.pk]), {"job": job.pk})
    assert raw["Content-Type"].startswith("text/plain")
    assert "RDMA_Write BW Test" in raw.text and "BW average[Gb/sec]" in raw.text


def test_a_viewer_sees_no_button_and_cannot_start(login, world, running):
    client = login("viewer")
    section = client.get(reverse("clusters:validation_section", args=[running.pk])).text
    # The button is there, disabled, and says why.
    assert 'disabled aria-describedby="validate-reason">클러스터 검증</button>' in section
    assert (
        'id="validate-reason" class="reason" role="note">권한 없음: Resource.VirtualCluster.UPDATE'
        in section
    )
    response = client.post(reverse("clusters:validation_start", args=[running.pk]))
    assert response.status_code == 403
    assert not Operation.objects.filter(kind=Operation.Kind.VALIDATE).exists()


def test_the_button_is_disabled_with_the_reason_under_two_running_members(login, world, running):
    running.members.exclude(name="gpu-node-01").update(status=VmStatus.STOPPED)
    section = login("admin").get(reverse("clusters:validation_section", args=[running.pk])).text
    # It counts the running members (4 are attached), and offers to start the others.
    assert "disabled" in section and "실행중인 멤버가 2대 이상 필요합니다" in section
    assert 'id="validation-start-all"' in section


def test_other_projects_get_404(login, world, running):
    client = login("other")
    assert client.get(reverse("clusters:validation_section", args=[running.pk])).status_code == 404
    member = running.members.first()
    url = reverse("clusters:member_replace", args=[running.pk])
    assert client.get(url, {"member": member.pk}).status_code == 404


def test_replace_page_lists_eligible_spares_and_swaps(login, world, running):
    spare = world.vm("spare-01")
    world.vm("spot-01", billing_type="SPOT")
    running.members.filter(name="gpu-node-03").update(status=VmStatus.STOPPED)
    member = VirtualMachine.objects.get(name="gpu-node-03")
    client = login("admin")
    url = reverse("clusters:member_replace", args=[running.pk])
    page = client.get(url, {"member": member.pk}).text
    assert "spare-01" in page and "spot-01" not in page
    response = client.post(url, {"member": member.pk, "spare": spare.pk})
    assert response.status_code == 302
    spare.refresh_from_db()
    assert spare.cluster_id == running.pk and spare.node_rank == 2
    assert client.post(url, {"member": member.pk, "spare": "nope"}).status_code == 404
    # Swapped, the spare still starting (its task not run here): the page offers no second 교체.
    after = client.get(url, {"member": member.pk}).text
    assert 'id="replace-running"' in after and 'id="replace-submit" disabled' in after
    info = client.get(reverse("clusters:cluster_detail", args=[running.pk])).text
    assert "node_rank=2 · spare-01" in info
    assert operations.visible_operations(world.admin).filter(kind="replace").exists()
