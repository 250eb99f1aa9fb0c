"""/metrics/federate/: a project's latest samples in Prometheus' text format, parsed back with
prometheus_client; the bearer token picks the project, through a function the API's tokens can
replace."""

import hashlib
from datetime import timedelta

import pytest
from django.urls import path, reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from clusters.models import ClusterStatus
from metrics import federate, storage
from portal import urls as portal_urls
from vms.models import VmStatus

TOKEN = "scrape-demo-token-1"
# The route exists once scraping is configured (metrics.federate.enabled): this module is
# its own URLconf, the portal's with the federation route.
urlpatterns = [
    *portal_urls.urlpatterns,
    path("metrics/federate/", federate.federate, name="metrics-federate"),
]
pytestmark = pytest.mark.urls(__name__)


@pytest.fixture
def scrape_setup(world, settings):
    cluster = world.cluster("fed", status=ClusterStatus.RUNNING)
    members = world.members(cluster, 2, status=VmStatus.RUNNING)
    other = world.cluster("elsewhere", project=world.other, status=ClusterStatus.RUNNING)
    (stranger,) = world.members(other, 1, status=VmStatus.RUNNING)
    settings.METRICS_SCRAPE_TOKENS = (
        f"{cluster.project.slug}={hashlib.sha256(TOKEN.encode()).hexdigest()}"
    )
    now = timezone.now()
    rows, gpus, ports = [], [], []
    for vm in (*members, stranger):
        for age in (40, 20):  # the newest is exposed
            at = now - timedelta(seconds=age)
            rows.append((vm.pk, at, float(age), 1.0, 50.0, 60.0, 1.0, 2.0, 3.0, 4.0))
            for gpu in range(2):
                gpus.append((vm.pk, at, gpu, 90.0 + gpu - age, *[None] * 10, 79.0 * gpu))
            ports.append((vm.pk, at, 0, 5e9, 6e9, 0.0, 1.0, 0.0, 4.0, 400.0))
    storage.write_samples(rows, devices={"gpu": gpus, "port": ports})
    return cluster, members, stranger


def scrape(client, token=TOKEN, **params):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get(reverse("metrics-federate"), params, headers=headers)


def samples_of(response):
    text = response.content.decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_projects_latest_samples_per_vm_gpu_and_port(client, scrape_setup):
    cluster, members, stranger = scrape_setup
    response = scrape(client)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    got = samples_of(response)
    vm = members[0]
    base = (("cluster", cluster.name), ("vm", vm.name), ("vm_id", str(vm.pk)))
    assert got[("vc_vm_cpu_utilization_percent", base)] == 20.0  # the newer of two
    assert got[("vc_gpu_utilization_percent", tuple(sorted((*base, ("gpu", "1")))))] == 71.0
    assert got[("vc_gpu_last_xid", tuple(sorted((*base, ("gpu", "1")))))] == 79.0
    assert got[("vc_fabric_port_rate_gbps", tuple(sorted((*base, ("port", "0")))))] == 400.0
    assert not any(dict(labels).get("vm") == stranger.name for _name, labels in got)
    assert ("vc_gpu_temperature_celsius", tuple(sorted((*base, ("gpu", "0"))))) not in got


def test_one_cluster_and_bad_input(client, scrape_setup, world):
    cluster, _members, _stranger = scrape_setup
    empty = world.cluster("quiet", status=ClusterStatus.RUNNING)
    assert not [k for k in samples_of(scrape(client, cluster=empty.pk))]
    assert samples_of(scrape(client, cluster=cluster.pk))
    assert scrape(client, cluster="1 OR 1=1").status_code == 400


@pytest.mark.parametrize("token", [None, "wrong-token", "x" * 500])
def test_a_scrape_without_the_projects_token_is_refused(client, scrape_setup, token):
    response = scrape(client, token=token)
    assert response.status_code == 401 and "Bearer" in response["WWW-Authenticate"]


def test_the_auth_function_can_be_swapped(client, scrape_setup, settings, world):
    settings.METRICS_SCRAPE_AUTH = f"{__name__}.everyone_reads_other"
    got = samples_of(scrape(client, token=None))
    assert {dict(labels)["cluster"] for _name, labels in got} == {"elsewhere"}


def everyone_reads_other(request):
    from portal.models import Project

    return Project.objects.get(slug="other")


def test_the_route_exists_only_once_scraping_is_configured(settings):
    settings.METRICS_SCRAPE_TOKENS = ""
    assert not federate.enabled()
    settings.METRICS_SCRAPE_TOKENS = "demo=" + "0" * 64
    assert federate.enabled()


def test_the_grafana_dashboard_uses_only_exposed_series():
    import json
    import re
    from pathlib import Path

    from metrics.storage import exposition

    dashboard = json.loads(
        (Path(federate.__file__).parent / "grafana" / "vc-gpus.json").read_text()
    )
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {name for expr in exprs for name in re.findall(r"\bvc_[a-z_]+", expr)}
    exposed = {name for names in exposition.NAMES.values() for name, _help in names.values()}
    assert used and used <= exposed, used - exposed
    assert {"vc_gpu_utilization_percent", "vc_fabric_port_rate_gbps"} <= used
