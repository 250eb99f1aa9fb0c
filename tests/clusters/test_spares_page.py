"""The members tab's 교체 정책 and 예비 section: offered to whom may change them, shown
disabled with the reason to a viewer."""

from django.urls import reverse

from clusters.models import ClusterSpare


def test_a_viewer_sees_the_controls_disabled_with_the_permission(login, world):
    cluster = world.cluster()
    ClusterSpare.objects.create(cluster=cluster, vm=world.vm("kept-01"))
    page = login("viewer").get(reverse("clusters:cluster_spares", args=[cluster.pk])).text
    assert 'data-spare="kept-01"' in page
    assert page.count("권한 없음: Resource.VirtualCluster.UPDATE") >= 3
    assert 'id="spare-add" disabled' in page and 'name="policy" id="policy-select" disabled' in page


def test_an_admin_adds_a_spare_and_sets_the_policy_from_the_section(login, world):
    cluster = world.cluster()
    vm = world.vm("kept-02")
    client = login("admin")
    url = reverse("clusters:cluster_spares", args=[cluster.pk])
    page = client.get(url).text
    assert f'<option value="{vm.pk}">kept-02</option>' in page and "권한 없음" not in page
    headers = {"HX-Request": "true"}
    add = reverse("clusters:cluster_spare_add", args=[cluster.pk])
    answer = client.post(add, {"vm": vm.pk}, headers=headers).text
    assert 'data-spare="kept-02"' in answer
    policy = reverse("clusters:cluster_policy", args=[cluster.pk])
    answer = client.post(policy, {"policy": "propose"}, headers=headers).text
    assert 'value="propose" selected' in answer and "설정했습니다" in answer
    refused = client.post(policy, {"policy": "bogus"}, headers=headers)
    assert refused.status_code == 422 and "교체 정책은" in refused.text
    members = client.get(reverse("clusters:cluster_members", args=[cluster.pk])).text
    assert url in members


def test_a_proposal_names_the_spare_and_one_click_does_it(login, world):
    from clusters.models import ClusterPolicy, Operation, ReplacePolicy
    from vms.models import VmHealth

    cluster = world.cluster()
    ClusterPolicy.objects.create(cluster=cluster, policy=ReplacePolicy.PROPOSE)
    bad, _ok = world.members(cluster, 2)
    type(bad).objects.filter(pk=bad.pk).update(health=VmHealth.ISOLATED)
    spare = world.vm("kept-03")
    ClusterSpare.objects.create(cluster=cluster, vm=spare)
    url = reverse("clusters:cluster_spares", args=[cluster.pk])
    viewer = login("viewer").get(url).text
    assert f'data-proposal="{bad.name}"' in viewer and "kept-03" in viewer
    assert "권한 없음: Resource.VirtualMachine.UPDATE" in viewer
    client = login("admin")
    page = client.get(url).text
    assert f'data-proposal="{bad.name}"' in page and 'id="proposal-replace-1" disabled' not in page
    client.post(
        reverse("clusters:member_replace", args=[cluster.pk]),
        {"member": bad.pk, "spare": spare.pk},
        headers={"HX-Request": "true"},
    )
    assert Operation.objects.get(kind=Operation.Kind.REPLACE).done
    assert spare in cluster.members.all() and "data-proposal" not in client.get(url).text
