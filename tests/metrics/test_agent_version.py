"""One version for the release: the portal's and the agent's (one ``VERSION``), what a
guest installs, and what the agent reports in its User-Agent — kept per VM only when it
changes (the ingest is the hot path), shown on the VM page and in the API's VM detail."""

import json
import time
import tomllib
from pathlib import Path

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from setuptools.config.pyprojecttoml import read_configuration

from metrics import agent_versions, liveness, services
from metrics.models import MetricsToken
from metrics.vm_agent import VERSION, collect
from metrics.vm_agent import jobs as agent_jobs
from metrics.vm_agent import main as agent
from portal.compute.backends.libvirt.guest import boot as guest
from tests.metrics.conftest import sample
from vms.models import VmStatus

ROOT = Path(__file__).resolve().parents[2]


def stored_version(vm):
    return MetricsToken.objects.get(vm=vm).agent_version


@pytest.fixture(autouse=True)
def fresh_rate_windows():
    cache.clear()


def test_the_portal_and_the_agent_have_one_version():
    portal = read_configuration(ROOT / "pyproject.toml")["project"]
    agent_dist = read_configuration(ROOT / "metrics" / "vm_agent" / "pyproject.toml")["project"]
    assert portal["name"] == "vc-portal" and agent_dist["name"] == "vc-metrics-agent"
    assert portal["version"] == agent_dist["version"] == VERSION
    # Neither writes its own: both read the one ``VERSION``.
    for path in (ROOT / "pyproject.toml", ROOT / "metrics" / "vm_agent" / "pyproject.toml"):
        project = tomllib.loads(path.read_text())["project"]
        assert "version" not in project and project["dynamic"] == ["version"]


def test_a_cloud_image_installs_the_portals_own_version(settings):
    def install_command():
        files = guest.seed_files(
            type("Vm", (), {"pk": 7, "name": "n"})(),
            fabric_address=None,
            portal_url="http://10.0.2.2:8000",
            metrics_token="vcm_x",
        )
        user = json.loads(files["user-data"].split(b"\n", 1)[1])
        return " ".join(" ".join(command) for command in user["runcmd"])

    assert f"pip install --quiet --break-system-packages vc-metrics-agent=={VERSION} " in (
        install_command()
    )
    settings.GUEST_AGENT_PIP_SPEC = "https://pkgs.example/vc_metrics_agent-9-py3-none-any.whl"
    assert "--break-system-packages https://pkgs.example/vc_metrics_agent-9" in install_command()


def test_the_agent_says_its_version_in_every_request():
    assert agent.USER_AGENT == f"vc-metrics-agent/{VERSION}"
    assert agent_jobs.USER_AGENT == f"vc-metrics-agent/{VERSION} jobs"
    for user_agent in (agent.USER_AGENT, agent_jobs.USER_AGENT):
        request = type("Request", (), {"headers": {"User-Agent": user_agent}})()
        assert agent_versions.reported(request) == VERSION


@pytest.mark.parametrize(
    "user_agent",
    ["", "curl/8.5.0", "python-requests/2.32", "vc-metrics-agent/", "vc-metrics-agent/" + "9" * 40],
)
def test_what_is_not_an_agents_version_is_not_taken_for_one(user_agent):
    request = type("Request", (), {"headers": {"User-Agent": user_agent}})()
    assert agent_versions.reported(request) is None


def test_ingest_keeps_the_version_and_writes_it_only_when_it_changes(post, token, running_vm):
    def send(user_agent, offset):
        with CaptureQueriesContext(connection) as queries:
            response = post(token, {"samples": [sample(time.time() - offset)]}, **user_agent)
        assert response.status_code == 200, response.content
        return len(queries)

    assert stored_version(running_vm) == ""
    send({"User-Agent": "vc-metrics-agent/0.0.9"}, 50)
    assert stored_version(running_vm) == "0.0.9"
    plain = send({}, 40)
    same = send({"User-Agent": "vc-metrics-agent/0.0.9"}, 30)
    assert same == plain  # an unchanged version costs no query
    assert stored_version(running_vm) == "0.0.9"
    changed = send({"User-Agent": f"vc-metrics-agent/{VERSION}"}, 20)
    assert changed == plain + 1 and stored_version(running_vm) == VERSION
    send({"User-Agent": "curl/8.5.0"}, 10)  # not an agent: the agent's version stays
    assert stored_version(running_vm) == VERSION


def row_version(vm):
    """Where the token row's current version lies (its ctid): any UPDATE of the row writes a
    new version elsewhere, even one that sets the value it had, even in the same transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT ctid::text FROM {MetricsToken._meta.db_table} WHERE vm_id = %s", [vm.pk]
        )
        return cursor.fetchone()[0]


@pytest.mark.postgres_only("a row's ctid is PostgreSQL's")
def test_a_version_another_process_wrote_is_not_written_again(post, token, running_vm):
    MetricsToken.objects.filter(vm=running_vm).update(agent_version="0.0.8")
    # The agent's last call was just noted (metrics.liveness): that write is not this one's.
    liveness.contact(MetricsToken.objects.get(vm=running_vm).token_hash)
    written = row_version(running_vm)
    accepted = post(token, {"samples": [sample()]}, **{"User-Agent": "vc-metrics-agent/0.0.8"})
    assert accepted.status_code in {200, 202}, accepted.content
    assert row_version(running_vm) == written  # guarded: it wrote no row
    assert stored_version(running_vm) == "0.0.8"


def test_a_refused_token_records_nothing(post, token, running_vm):
    made_up = "vcm_" + "z" * 43
    with CaptureQueriesContext(connection) as queries:
        refused = post(made_up, {"samples": [sample()]}, **{"User-Agent": "vc-metrics-agent/6"})
    assert refused.status_code == 401
    assert not [q for q in queries if "agent_version" in q["sql"]]  # asked only once verified
    assert stored_version(running_vm) == ""


def test_the_check_and_job_endpoints_keep_it_too(client, token, running_vm):
    for name, version in (("metrics:ingest_check", "0.0.7"), ("metrics:ingest_jobs_next", "0.0.6")):
        response = client.post(
            reverse(name),
            headers={
                "Authorization": f"Bearer {token}",
                "User-Agent": f"vc-metrics-agent/{version} jobs",
            },
        )
        assert response.status_code == 200
        assert stored_version(running_vm) == version


def test_a_rotated_token_keeps_the_vms_version(post, token, running_vm):
    post(token, {"samples": [sample()]}, **{"User-Agent": "vc-metrics-agent/0.0.5"})
    services.rotate_token(running_vm.pk, actor=None)
    assert stored_version(running_vm) == "0.0.5"


def page(login, vm):
    response = login("admin").get(reverse("vms:vm_edit", args=[vm.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_vm_page_shows_the_version_and_an_agent_left_behind(login, token, running_vm):
    assert "에이전트가 아직 버전을 알리지 않았습니다." in page(login, running_vm)
    MetricsToken.objects.filter(vm=running_vm).update(agent_version=VERSION)
    html = page(login, running_vm)
    assert f"에이전트 버전: <code>{VERSION}</code>" in html and "포털과 버전이" not in html
    MetricsToken.objects.filter(vm=running_vm).update(agent_version="0.0.1")
    html = page(login, running_vm)
    assert "에이전트 버전: <code>0.0.1</code>" in html
    assert f"포털과 버전이 다릅니다 (포털 {VERSION})." in html


@pytest.mark.django_db(transaction=True)
def test_the_running_agent_reports_its_version(world, live_server, tmp_path):
    vm = world.vm("reporting", status=VmStatus.RUNNING)
    _vm, token = services.rotate_token(vm.pk, actor=None)
    url = f"{live_server.url}/api/metrics/ingest"
    running = agent.Agent(url, token, collector=collect.Collector(tmp_path))
    running.tick()
    assert running.stored == 1 and stored_version(vm) == VERSION
