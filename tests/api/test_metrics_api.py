"""GET /api/v1/virtual-clusters/{id}/metrics: the cluster's members' latest samples in
Prometheus' text format, with an API token and the cluster's READ gate."""

from datetime import timedelta

from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from clusters.models import ClusterStatus
from metrics import storage
from vms.models import VmStatus


def test_a_clusters_series_for_prometheus_with_an_api_token(api, world, secrets):
    cluster = world.cluster("fed", status=ClusterStatus.RUNNING)
    members = world.members(cluster, 2, status=VmStatus.RUNNING)
    elsewhere = world.cluster("elsewhere", status=ClusterStatus.RUNNING)
    (outside,) = world.members(elsewhere, 1, status=VmStatus.RUNNING)
    at = timezone.now() - timedelta(seconds=20)
    rows = [(vm.pk, at, 10.0, 1.0, 50.0, 60.0, 1.0, 2.0, 3.0, 4.0) for vm in (*members, outside)]
    gpus = [(vm.pk, at, 0, 77.0, *[None] * 10, 0.0) for vm in (*members, outside)]
    storage.write_samples(rows, devices={"gpu": gpus, "port": []})
    response = api.get(f"/virtual-clusters/{cluster.pk}/metrics", token=secrets["viewer"])
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    samples = [
        s
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    ]
    vms = {s.labels.get("vm") for s in samples}
    assert vms == {vm.name for vm in members}  # the other cluster's member is not there
    assert any(s.name == "vc_gpu_utilization_percent" and s.value == 77.0 for s in samples)
    # Another project's token sees no such cluster; no token is 401.
    assert (
        api.get(f"/virtual-clusters/{cluster.pk}/metrics", token=secrets["other"]).status_code
        == 404
    )
    assert api.get(f"/virtual-clusters/{cluster.pk}/metrics").status_code == 401


def test_a_cluster_only_role_gets_no_member_figures(api, world):
    """Member names, ids and per-GPU figures are VM data: a role that reads clusters but not
    VMs is refused (as on the console's 메트릭 tab, members, hostfile and launch)."""
    from django.contrib.auth import get_user_model

    from portal.iam import tokens
    from portal.iam.permissions import Perm
    from portal.models import Role, RoleBinding

    role = Role.objects.create(name="cluster-hand", permissions=[Perm.CLUSTER_READ])
    user = get_user_model().objects.create_user("clusterhand")
    RoleBinding.objects.create(user=user, project=world.demo, role=role)
    _token, secret = tokens.issue_token(user=user, project_id=world.demo.pk, name="c")
    cluster = world.cluster("fed", status=ClusterStatus.RUNNING)
    (member,) = world.members(cluster, 1, status=VmStatus.RUNNING, prefix="secret-node")
    at = timezone.now() - timedelta(seconds=20)
    storage.write_samples(
        [(member.pk, at, 10.0, 1.0, 50.0, 60.0, 1.0, 2.0, 3.0, 4.0)],
        devices={"gpu": [(member.pk, at, 0, 77.0, *[None] * 10, 0.0)], "port": []},
    )
    response = api.get(f"/virtual-clusters/{cluster.pk}/metrics", token=secret)
    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["permission"] == Perm.VM_READ
    assert b"secret-node" not in response.content
