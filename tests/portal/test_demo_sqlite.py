"""The README's first command runs the portal on the embedded SQLite (no ``DATABASE_URL``),
while the suite runs on PostgreSQL: a child process walks the demo's pages, metrics included,
on a SQLite file, so SQL only PostgreSQL speaks cannot slip into a page the demo shows."""

import os

import pytest

from tests.child import run_python

SCRIPT = """
import django
django.setup()
from django.core.management import call_command
from django.test import Client
from clusters.models import VirtualCluster
from metrics import tasks
from vms.models import VirtualMachine

call_command("migrate", verbosity=0)
call_command("seed_demo", verbosity=0)
running = VirtualMachine.objects.get(name="gpu-running-01")
cluster = VirtualCluster.objects.create(
    project=running.project, name="sq", zone=running.zone, status="RUNNING",
    instance_type=running.instance_type, fabric_type="INFINIBAND",
)
VirtualMachine.objects.filter(name__in=["gpu-running-01", "gpu-node-01"]).update(
    cluster=cluster, status="RUNNING"
)
for _ in range(3):
    tasks.emit_simulated_samples()
tasks.rollup()
client = Client()
assert client.login(username="admin", password=PASSWORD)
vm = VirtualMachine.objects.get(name="gpu-running-01")
pages = ["/clusters/", "/vms/", "/clusters/help/", f"/vms/{vm.pk}/"]
for cluster in VirtualCluster.objects.all():
    pages += [f"/clusters/{cluster.pk}/", f"/clusters/{cluster.pk}/vms/",
              f"/clusters/{cluster.pk}/metrics/charts/?range=1h",
              f"/clusters/{cluster.pk}/metrics/devices/?range=1h"]
for page in pages:
    status = client.get(page).status_code
    print(page, status)
"""


@pytest.mark.slow
def test_the_demo_pages_answer_on_sqlite(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "DEMO_PASSWORD": "sqlite-demo-pass",
    }
    done = run_python(f"PASSWORD = 'sqlite-demo-pass'\n{SCRIPT}", env, timeout=600)
    answers = dict(line.rsplit(" ", 1) for line in done.stdout.splitlines() if line[:1] == "/")
    assert len(answers) == 8 and set(answers.values()) == {"200"}, answers
