"""GET /api/v1/virtual-clusters/{id}/metrics (issue 13 item 3): the cluster's members' latest
samples in Prometheus' text format, with an API token and the cluster's READ gate."""

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
