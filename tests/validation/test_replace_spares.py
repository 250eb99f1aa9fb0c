"""The 교체 page shows what it chooses from: each spare's last verdict (from any cluster it
was judged in), a 불량 or 점검 필요 spare marked, nothing pre-selected; the swap is
confirmed and answered with a progress card; the member's 교체 button is hidden while it
is stopping."""

import re

from django.urls import reverse
from django.utils import timezone

from clusters.models import Operation
from clusters.models.validation import ValidationRun, ValidationVerdict, Verdict
from vms.models import VirtualMachine, VmStatus


def judge(cluster, verdicts):
    """A finished 검증 run of ``cluster`` with {vm: verdict}."""
    operation = Operation.objects.create(
        kind=Operation.Kind.VALIDATE,
        project=cluster.project,
        cluster=cluster,
        finished_at=timezone.now(),
    )
    run = ValidationRun.objects.create(operation=operation, finished_at=timezone.now())
    for vm, verdict in verdicts.items():
        ValidationVerdict.objects.create(run=run, vm=vm, vm_name=vm.name, verdict=verdict)
    return run


def test_a_spare_judged_bad_elsewhere_is_marked_and_nothing_is_preselected(login, world, running):
    old = world.cluster("old")
    bad, warn, good = world.vm("spare-bad"), world.vm("spare-warn"), world.vm("spare-ok")
    judge(old, {bad: Verdict.BAD, warn: Verdict.WARN, good: Verdict.OK})
    member = VirtualMachine.objects.get(name="gpu-node-03")
    page = (
        login("admin")
        .get(reverse("clusters:member_replace", args=[running.pk]), {"member": member.pk})
        .text
    )
    rows = dict(re.findall(r'data-spare="([\w-]+)">(.*?)</label>', page, re.S))
    assert set(rows) == {"spare-bad", "spare-warn", "spare-ok"}
    assert 'data-verdict="BAD"' in rows["spare-bad"] and "주의" in rows["spare-bad"]
    assert 'data-verdict="WARN"' in rows["spare-warn"] and "주의" in rows["spare-warn"]
    assert 'data-verdict="OK"' in rows["spare-ok"] and "주의" not in rows["spare-ok"]
    assert "checked" not in "".join(rows.values())
    assert "hx-confirm=" in page and "gpu-node-03을 선택한 예비 가상머신으로 교체합니다" in page


def test_the_swap_answers_with_a_progress_card(login, world, running):
    spare = world.vm("spare-01")
    member = VirtualMachine.objects.get(name="gpu-node-03")
    response = login("admin").post(
        reverse("clusters:member_replace", args=[running.pk]),
        {"member": member.pk, "spare": spare.pk},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert 'class="op-card' in response.text and response["HX-Retarget"] == "#operations"
    assert Operation.objects.filter(kind=Operation.Kind.REPLACE, cluster=running).exists()


def test_no_replace_button_while_the_member_is_stopping(login, world, running):
    member = VirtualMachine.objects.get(name="gpu-node-03")
    judge(running, {member: Verdict.BAD})
    url = reverse("clusters:member_replace", args=[running.pk]) + f"?member={member.pk}"
    client = login("admin")
    members = reverse("clusters:cluster_members", args=[running.pk])
    assert client.get(members).text.count(url) == 1
    section = reverse("clusters:validation_section", args=[running.pk])
    assert client.get(section).text.count(url) == 1
    VirtualMachine.objects.filter(pk=member.pk).update(status=VmStatus.STOPPING)
    assert url not in client.get(members).text
    assert url not in client.get(section).text
