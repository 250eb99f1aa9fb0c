"""The API on the demo's embedded database (SQLite), as a new user meets it after the README's
first command: ``vc`` creates a cluster and lists it (``vc cluster create … && vc cluster list
-o json``), fills it and starts it, then every GET route of the OpenAPI document is walked with
a real token, each path parameter filled with every real id, and every answer is as documented,
never a 5xx; then ``vc`` makes every other change the API takes. The suite runs on PostgreSQL,
so this runs in a child process on a SQLite file of its own: SQL only PostgreSQL speaks cannot
slip into an API route the demo answers (tests/portal/test_demo_sqlite.py does the same for the
pages)."""

import json
import os

import pytest

from tests.child import run_python

# A public key (its private half was thrown away): what a user registers with ``vc ssh-key``.
PUBLIC_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICPLMdeRcKNO/IY5rB42gPrqrpKYdw3A1UL0wxo8NsmE alice@laptop"
)

SCRIPT = r"""
import contextlib, io, json, logging, os, re, threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

import django
django.setup()
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import call_command
from django.test import Client

import vc_cli.main as cli
from clusters.models import Operation, VirtualCluster
from metrics import tasks
from tests.api.conftest import check_against_schema
from vms.models import VirtualMachine
from portal.catalog.models import Zone
from portal.models import SshKey
from portal.webhooks.models import Webhook

logging.disable(logging.INFO)  # the audit's and the tasks' lines: not what a failure shows
call_command("migrate", verbosity=0)
call_command("seed_demo", verbosity=0)
out = io.StringIO()
call_command("create_api_token", user="admin", project="demo", stdout=out)
token = out.getvalue().strip()


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


server = make_server("127.0.0.1", 0, WSGIHandler(), handler_class=Quiet)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_port}"


def vc(*argv):
    # The CLI as a user runs it (``vc --url … --token …``), over HTTP: (exit code, stdout).
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(["--url", url, "--token", token, *argv])
    return {"argv": list(argv), "code": code, "out": stdout.getvalue(), "err": stderr.getvalue()}


place = ["--zone", "kr-central-1a", "--instance-type", "gpu.h100x8"]
wait = ["--wait", "--poll", "0.05"]
key_file = os.path.join(os.environ["PORTAL_VAR_DIR"], "walk.pub")
with open(key_file, "w") as written:
    written.write(PUBLIC_KEY + "\n")
key_run = vc("-o", "json", "ssh-key", "create", "--name", "walk-key", "--file", key_file)
runs = [
    vc("-o", "json", "cluster", "create", "walk", *place, "--fabric", "INFINIBAND", *wait),
    vc("-o", "json", "cluster", "list"),
    vc("-o", "json", "vm", "create", "walk-node", *place, "--count", "2", "--cluster", "walk",
       "--ssh-key", "walk-key", *wait),
    vc("-o", "json", "cluster", "start", "walk", *wait),
    vc("-o", "json", "vm", "start", "walk-node-01", *wait),
    vc("-o", "json", "vm", "start", "walk-node-02", *wait),
    vc("-o", "json", "cluster", "validate", "walk", *wait),
]
hook_run = vc("-o", "json", "webhook", "create", "walk-hook", "http://127.0.0.1:9/hook")
for _ in range(3):
    tasks.emit_simulated_samples()
tasks.rollup()

# Every GET route of the document, each path parameter filled with every id of its kind,
# each query parameter with a value that names something, each list ordered every way and
# followed to its second page (keyset bounds compared on SQLite's own values).
client = Client(headers={"Authorization": f"Bearer {token}"})
document = client.get("/api/v1/openapi.json").json()
ids = {
    "cluster_id": list(VirtualCluster.objects.values_list("pk", flat=True)),
    "vm_id": list(VirtualMachine.objects.values_list("pk", flat=True)),
    "operation_id": list(Operation.objects.values_list("pk", flat=True)),
    "key_id": list(SshKey.objects.values_list("pk", flat=True)),
    "webhook_id": list(Webhook.objects.values_list("pk", flat=True)),
}
walk = VirtualCluster.objects.get(name="walk")
values = {
    "zone": Zone.objects.order_by("code").first().code,
    "instance_type": "gpu.h100x8",
    "status": "RUNNING",
    "name": "walk",
    "cluster": str(walk.pk),
    "include_raw": "true",
}
ORDERS = ["name", "-name", "created_at", "-created_at"]
answers = []


def get(template, path, query=""):
    response = client.get(path + (f"?{query}" if query else ""))
    problem = ""
    if response.status_code < 500:
        try:
            check_against_schema("GET", path, response)
        except Exception as failed:  # an AssertionError, or the validator's ValidationError
            problem = f"{type(failed).__name__}: {str(failed)[:300]}"
    answers.append({"route": template, "url": response.request["PATH_INFO"] + "?" + query,
                    "status": response.status_code, "problem": problem})
    return response


for template, item in document["paths"].items():
    if "get" not in item:
        continue
    params = item["get"].get("parameters", [])
    named = re.findall(r"{(\w+)}", template)
    paths = [template]
    for name in named:
        paths = [p.replace("{" + name + "}", str(pk)) for p in paths for pk in ids[name]]
    queries = [""] + [f"{p['name']}={values[p['name']]}" for p in params
                      if p["in"] == "query" and p["name"] in values]
    if any(p["name"] == "page_token" for p in params):
        queries += [f"order_by={order}&page_size=1" for order in ORDERS]
    for path in paths:
        for query in queries:
            response = get(template, path, query)
            following = "page_size=1" in query and response.status_code == 200
            following = following and response.json()["next_page_token"]
            if following:
                get(template, path, f"{query}&page_token={following}")

# Every other change the API takes, once each (a VM's rename is not a vc command).
changes = [
    vc("-o", "json", "vm", "create", "walk-spare", *place, *wait),
    vc("-o", "json", "cluster", "replace", "walk", "walk-node-02", "walk-spare", *wait),
    vc("-o", "json", "cluster", "rename", "walk", "walked"),
    vc("-o", "json", "vm", "stop", "walk-node-01", *wait),
    vc("-o", "json", "cluster", "stop", "walked", "--stop-members", *wait),
    vc("-o", "json", "cluster", "detach", "walked", "walk-node-01", *wait),
    vc("-o", "json", "vm", "delete", "walk-node-01", *wait),
    vc("-o", "json", "cluster", "delete", "walked", *wait),
]
server.shutdown()
spare = VirtualMachine.objects.get(name="walk-spare")
renamed = client.patch(f"/api/v1/virtual-machines/{spare.pk}", {"name": "walk-spare-2"},
                       content_type="application/json")

print("RESULT " + json.dumps({
    "vc": runs,
    "key": key_run,
    "hook": hook_run,
    "routes": sorted(t for t, item in document["paths"].items() if "get" in item),
    "answers": answers,
    "changes": changes,
    "renamed": [renamed.status_code, renamed.json()],
}))
"""


@pytest.mark.slow
def test_vc_and_every_api_route_answer_on_sqlite(tmp_path):
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL", "TEST_DATABASE_NAME")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",  # tasks eager, the simulator at full speed
        DATABASE_URL=f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        PORTAL_VAR_DIR=str(tmp_path),  # the embedded broker's folders too
    )
    done = run_python(f"PUBLIC_KEY = {PUBLIC_KEY!r}\n" + SCRIPT, env, timeout=600)
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))

    def succeeded(run):
        assert run["code"] == 0, (run["argv"], run["code"], run["err"][-3000:])
        return json.loads(run["out"])

    # A key registered with vc, then given to the VMs made below.
    assert succeeded(result["key"])["fingerprint"].startswith("SHA256:")
    # A webhook made with vc: its routes below are read with its id.
    assert succeeded(result["hook"])["name"] == "walk-hook"
    # vc cluster create … && vc cluster list -o json, then the cluster filled and started.
    create, listed, *ready = result["vc"]
    created = succeeded(create)
    assert created["kind"] == "create_cluster" and created["done"] and not created["error"]
    clusters = {cluster["name"]: cluster for cluster in succeeded(listed)}
    assert clusters["walk"]["status"] == "UNALLOCATED", clusters
    assert (clusters["walk"]["zone"], clusters["walk"]["instance_type"]) == (
        "kr-central-1a",
        "gpu.h100x8",
    )
    *started, validated = [succeeded(run) for run in ready]
    assert all(op["done"] and not op["error"] for op in started), started
    assert [v["verdict"] for v in validated["verdicts"]] == ["OK", "OK"], validated

    answers = result["answers"]
    server_errors = [a for a in answers if a["status"] >= 500]
    assert not server_errors, server_errors
    undocumented = [a for a in answers if a["problem"]]
    assert not undocumented, undocumented
    # Every GET route was walked and answered with its rows at least once.
    answered = {a["route"] for a in answers if a["status"] == 200}
    assert answered == set(result["routes"]), set(result["routes"]) - answered

    for run in result["changes"]:
        succeeded(run)
    assert result["renamed"][0] == 200 and result["renamed"][1]["name"] == "walk-spare-2"
