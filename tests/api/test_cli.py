"""The ``vc`` CLI end to end: over HTTP against the live test server, a real Celery worker on
Redis running every transition (the ``redis_worker`` fixture)."""

import json

import pytest
from django.utils import translation

import vc_cli.main as cli
from clusters.models import ClusterStatus, VirtualCluster
from portal.foundation.errors import NotEnoughMembers
from portal.iam import tokens
from vc_cli import http, output
from vms.models import VirtualMachine, VmStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def vc(live_server, world, monkeypatch, capsys):
    """``vc("cluster", "list")`` runs the CLI as ``admin`` of ``demo``: (exit code, stdout,
    stderr)."""
    _token, secret = tokens.issue_token(user=world.admin, project_id=world.demo.pk, name="cli")
    monkeypatch.setenv("VC_URL", live_server.url)
    monkeypatch.setenv("VC_TOKEN", secret)
    monkeypatch.setenv("VC_CONFIG", "/nonexistent")

    def run(*argv):
        code = cli.main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def ok(result):
    code, out, err = result
    assert code == 0, err
    return out


def test_cluster_life_through_the_cli(vc, world, redis_worker):
    place = ("--zone", "kr-central-1a", "--instance-type", "gpu.h100x8")
    created = json.loads(
        ok(
            vc(
                "-o",
                "json",
                "cluster",
                "create",
                "e2e",
                *place,
                "--fabric",
                "INFINIBAND",
                "--wait",
                "--poll",
                "0.1",
            )
        )
    )
    assert created["done"] and created["kind"] == "create_cluster"
    cluster = VirtualCluster.objects.get(name="e2e")
    assert cluster.status == ClusterStatus.UNALLOCATED

    vms = json.loads(ok(vc("-o", "json", "vm", "create", "node", *place, "--count", "2")))
    assert [i["target_name"] for i in vms["items"]] == ["node-01", "node-02"]
    attached = ok(vc("cluster", "attach", "e2e", "node-01", "node-02", "--wait"))
    assert "SUCCEEDED" in attached and "FAILED" not in attached

    _code, _out, err = vc("cluster", "start", "e2e", "--wait", "--poll", "0.1")
    assert _code == 0, err
    assert "operation" in err  # progress on stderr
    assert VirtualCluster.objects.get(pk=cluster.pk).status == ClusterStatus.RUNNING
    for name in ("node-01", "node-02"):
        ok(vc("vm", "start", name, "--wait", "--poll", "0.1"))
    assert set(VirtualMachine.objects.values_list("status", flat=True)) == {VmStatus.RUNNING}

    hostfile = ok(vc("cluster", "hostfile", "e2e")).splitlines()
    ips = VirtualMachine.objects.order_by("pk").values_list("private_ip", flat=True)
    assert hostfile == [f"{ip} slots=8  # node-0{i + 1}" for i, ip in enumerate(ips)]
    launch = ok(vc("cluster", "launch", "e2e"))
    assert "export NCCL_IB_HCA=mlx5" in launch and "--node_rank=1" in launch
    listed = ok(vc("cluster", "list"))
    assert "e2e" in listed and "RUNNING" in listed.splitlines()[1]

    stopping = json.loads(ok(vc("-o", "json", "cluster", "stop", "e2e", "--stop-members")))
    waited = json.loads(ok(vc("-o", "json", "op", "wait", str(stopping["id"]), "--poll", "0.1")))
    assert waited["done"] and waited["error"] is None
    assert VirtualCluster.objects.get(pk=cluster.pk).status == ClusterStatus.TERMINATED
    assert set(VirtualMachine.objects.values_list("status", flat=True)) == {VmStatus.STOPPED}
    ok(vc("cluster", "delete", "e2e", "--wait"))
    assert VirtualCluster.objects.get(pk=cluster.pk).status == ClusterStatus.DELETED


def test_refusals_exit_non_zero_with_the_rules_message(vc, world):
    lonely = world.cluster("lonely")
    world.members(lonely, 1)
    code, _out, err = vc("cluster", "start", "lonely", "--wait")
    assert code == http.EXIT_REFUSED
    with translation.override("ko"):  # whatever an earlier test left active here
        korean = NotEnoughMembers().message
    assert korean in err
    code, _out, err = vc("cluster", "get", "999999")
    assert code == http.EXIT_NOT_FOUND
    code, _out, err = vc("--token", "vcp_nope", "cluster", "list")
    assert code == http.EXIT_AUTH and "API" in err
    code, _out, err = vc("--lang", "en", "cluster", "start", "lonely")
    with translation.override("en"):
        english = NotEnoughMembers().message
    assert code == http.EXIT_REFUSED and english in err and english != korean


def test_no_configuration_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.delenv("VC_URL", raising=False)
    monkeypatch.delenv("VC_TOKEN", raising=False)
    monkeypatch.setenv("VC_CONFIG", "/nonexistent")
    assert cli.main(["cluster", "list"]) == http.EXIT_USAGE
    assert "VC_URL" in capsys.readouterr().err


def test_a_config_file_is_read(tmp_path, monkeypatch, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"url": "http://127.0.0.1:9", "token": "vcp_x"}))
    monkeypatch.delenv("VC_URL", raising=False)
    monkeypatch.delenv("VC_TOKEN", raising=False)
    monkeypatch.setenv("VC_CONFIG", str(config))
    # Port 9 (discard) refuses: the file's URL was used, and a network failure is exit 5.
    assert cli.main(["cluster", "list"]) == http.EXIT_SERVER
    assert "127.0.0.1:9" in capsys.readouterr().err


def test_table_output():
    assert output.table([], ("id", "name")) == "ID  NAME"  # nothing to list: the header only
    rows = [{"id": 1, "name": "a", "status": "RUNNING", "last_error": None}]
    assert output.table(rows, ("id", "name", "status", "last_error")).splitlines() == [
        "ID  NAME  STATUS   LAST_ERROR",
        "1   a     RUNNING  -",
    ]


def test_cluster_rename_through_the_cli(vc, world):
    cluster = world.cluster("before")
    out = json.loads(ok(vc("-o", "json", "cluster", "rename", "before", "after")))
    assert out["name"] == "after"
    assert VirtualCluster.objects.get(pk=cluster.pk).name == "after"
    code, _out, err = vc("cluster", "rename", "after", "bad name")
    assert code == http.EXIT_REFUSED and "이름에는" in err


def test_validate_and_replace_through_the_cli(vc, world, redis_worker):
    """``vc cluster validate --wait`` finds the straggler (exit 1, its row 불량 with GPU 5
    in the reasons), ``vc cluster replace`` swaps it for a spare that takes its node_rank
    and runs, on a real worker."""
    from clusters import services

    world.capacity(16)
    cluster = world.cluster("val")
    for index, name in enumerate(("gpu-node-01", "gpu-node-02", "gpu-node-03")):
        vm = world.vm(name, private_ip=f"10.0.0.{10 + index}")
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    cluster.members.update(status=VmStatus.RUNNING)
    VirtualCluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)

    code, out, err = vc("cluster", "validate", "val", "--wait", "--poll", "0.2")
    assert code == http.EXIT_REFUSED, err
    assert err.strip().endswith("gpu-node-03")
    rows = {line.split()[1]: line for line in out.splitlines()[1:]}
    assert "불량" in rows["gpu-node-03"] and "GPU 5" in rows["gpu-node-03"]
    assert "정상" in rows["gpu-node-01"] and "정상" in rows["gpu-node-02"]
    history = ok(vc("cluster", "validations", "val")).splitlines()
    assert len(history) == 2 and "불량 1" in history[1] and "정상 2" in history[1]

    world.vm("spare")
    out = ok(vc("cluster", "replace", "val", "gpu-node-03", "spare", "--wait", "--poll", "0.2"))
    assert "FAILED" not in out
    members = dict(cluster.members.values_list("name", "node_rank"))
    assert members == {"gpu-node-01": 0, "gpu-node-02": 1, "spare": 2}
    assert VirtualMachine.objects.get(name="spare").status == VmStatus.RUNNING
    assert VirtualMachine.objects.get(name="gpu-node-03").cluster_id is None
    launch = ok(vc("cluster", "launch", "val"))
    assert launch.index("# gpu-node-02") < launch.index("# spare")
    assert "--nnodes=3 --node_rank=2" in launch.split("# spare")[1]


def test_global_options_go_before_or_after_the_subcommand(vc, world):
    """The README writes ``vc cluster list -o json``."""
    world.cluster("anywhere")
    for argv in (
        ("-o", "json", "cluster", "list"),
        ("cluster", "-o", "json", "list"),
        ("cluster", "list", "-o", "json"),
        ("cluster", "list", "--output", "json", "--lang", "en"),
    ):
        assert [c["name"] for c in json.loads(ok(vc(*argv)))] == ["anywhere"], argv
    code, _out, _err = vc("cluster", "list", "--token", "vcp_nope")
    assert code == http.EXIT_AUTH
    code, _out, _err = vc("--token", "vcp_nope", "cluster", "list", "--name", "anywhere")
    assert code == http.EXIT_AUTH  # given before, not reset by the subcommand's parser


def test_cluster_straggler_names_it_only_when_there_is_one(vc, world):
    """``vc cluster straggler``: the 메트릭 tab's lines; ``-o json`` the API's answer."""
    from datetime import timedelta

    from django.utils import timezone

    from tests.metrics.test_straggler import write

    now = timezone.now()
    clusters = {}
    lagging = {"even": None, "lag": (0, 0)}  # (member, GPU) at 60 %; every other GPU at 94 %
    for name, slow_gpu in lagging.items():
        cluster = world.cluster(name, status=ClusterStatus.RUNNING)
        members = world.members(cluster, 3, status=VmStatus.RUNNING, prefix=f"{name}-m")
        clusters[name] = sorted(members, key=lambda vm: vm.name)
        write(
            clusters[name],
            now - timedelta(minutes=12),
            now - timedelta(seconds=5),
            lambda i, g, r, slow_gpu=slow_gpu: 60.0 if (i, g) == slow_gpu else 94.0,
        )
    assert ok(vc("cluster", "straggler", "even")).splitlines() == [
        "느린 멤버 없음 — 모든 멤버가 최근 5분 중앙값과 10%p 이내"
    ]
    slow = clusters["lag"][0].name
    assert ok(vc("cluster", "straggler", "lag")).splitlines() == [
        f"가장 느린 멤버: {slow} (GPU 0) — 최근 5분 중앙값과 -34.0%p (기준 10%p)"
    ]
    found = json.loads(ok(vc("-o", "json", "cluster", "straggler", "lag")))
    assert found["straggler"] == {"vm_name": slow, "device": 0, "gap": -34.0}
