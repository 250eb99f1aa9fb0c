"""클러스터 검증 and 교체 through the API: a run started with ``:validate`` finds the
straggler and ``/validations`` reads it back in the caller's language; ``:replace`` swaps a
member for a spare at its node_rank; refusals are the rules' own, and change nothing."""

import pytest

from clusters import services
from clusters.models import ClusterStatus, Operation, VirtualCluster
from clusters.models.validation import ValidationRun
from vms.models import BillingType, VirtualMachine, VmStatus

pytestmark = pytest.mark.django_db
NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]


def running_cluster(world, names=NODES):
    world.capacity(16)
    cluster = world.cluster("train")
    for index, name in enumerate(names):
        vm = world.vm(name, private_ip=f"10.0.0.{10 + index}")
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    cluster.members.update(status=VmStatus.RUNNING)
    VirtualCluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)
    return cluster


def snapshot():
    return (
        sorted(VirtualCluster.objects.values_list("pk", "status")),
        sorted(VirtualMachine.objects.values_list("pk", "status", "cluster_id", "node_rank")),
        Operation.objects.count(),
    )


def test_validate_finds_the_straggler_and_validations_read_it_back(
    api, world, secrets, django_capture_on_commit_callbacks
):
    cluster = running_cluster(world)
    with django_capture_on_commit_callbacks(execute=True):
        started = api.post(
            f"/virtual-clusters/{cluster.pk}:validate",
            token=secrets["operator"],
            body={"level": 1},
        )
    assert started.status_code == 202, started.content
    operation = started.json()
    assert operation["kind"] == "validate" and len(operation["items"]) == 4

    done = api.get(f"/operations/{operation['id']}", token=secrets["viewer"]).json()
    assert done["done"] is True
    assert {i["target_name"]: i["status"] for i in done["items"]} == {
        "gpu-node-01": "SUCCEEDED",
        "gpu-node-02": "SUCCEEDED",
        "gpu-node-03": "FAILED",
        "gpu-node-04": "SUCCEEDED",
    }

    page = api.get(f"/virtual-clusters/{cluster.pk}/validations", token=secrets["viewer"]).json()
    [run] = page["items"]
    assert (run["operation_id"], run["actor"], run["level"], run["done"]) == (
        operation["id"],
        "operator",
        1,
        True,
    )
    assert run["seconds"] is not None and run["thresholds"]["ib_write_bw_gbps"] == 375.0
    verdicts = {v["vm_name"]: v for v in run["verdicts"]}
    assert {name: v["verdict"] for name, v in verdicts.items()} == {
        "gpu-node-01": "OK",
        "gpu-node-02": "OK",
        "gpu-node-03": "BAD",
        "gpu-node-04": "OK",
    }
    bad = verdicts["gpu-node-03"]
    assert bad["verdict_label"] == "불량"
    messages = [reason["message"] for reason in bad["reasons"]]
    assert any("ib_write_bw" in m and "GPU 5" in m and "Gb/s" in m for m in messages), messages
    assert all(reason["code"] and reason["level"] for reason in bad["reasons"])
    kinds = {check["kind"] for check in run["checks"]}
    assert kinds == {"gpu", "nccl_local", "ib_client", "nccl_pair", "nccl_all"}
    assert all("raw" not in check or check["raw"] is None for check in run["checks"])
    assert all(check["status"] == "DONE" and check["summary"] for check in run["checks"])

    english = api.get(
        f"/virtual-clusters/{cluster.pk}/validations?include_raw=true",
        token=secrets["viewer"],
        headers={"Accept-Language": "en"},
    ).json()["items"][0]
    bad_en = next(v for v in english["verdicts"] if v["vm_name"] == "gpu-node-03")
    assert bad_en["verdict_label"] == "Bad"
    assert all(check["raw"] for check in english["checks"])
    assert any("GPU 5" in reason["message"] for reason in bad_en["reasons"])


def test_validations_are_paged_newest_first(
    api, world, secrets, django_capture_on_commit_callbacks
):
    cluster = running_cluster(world, NODES[:2])
    for _ in range(3):
        with django_capture_on_commit_callbacks(execute=True):
            assert (
                api.post(f"/virtual-clusters/{cluster.pk}:validate", token=secrets["admin"])
            ).status_code == 202
    first = api.get(
        f"/virtual-clusters/{cluster.pk}/validations?page_size=2", token=secrets["viewer"]
    ).json()
    assert len(first["items"]) == 2 and first["next_page_token"]
    second = api.get(
        f"/virtual-clusters/{cluster.pk}/validations?page_size=2&page_token="
        + first["next_page_token"],
        token=secrets["viewer"],
    ).json()
    ids = [run["operation_id"] for run in first["items"] + second["items"]]
    assert ids == sorted(ValidationRun.objects.values_list("pk", flat=True), reverse=True)
    assert second["next_page_token"] is None


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"level": 3}, 422, "diag_level_invalid"),
        ({"level": -(2**70)}, 422, None),
        ({"level": "two"}, 422, None),
    ],
)
def test_validate_refuses_bad_input_and_changes_nothing(api, world, secrets, body, status, code):
    cluster = running_cluster(world, NODES[:2])
    before = snapshot()
    response = api.post(
        f"/virtual-clusters/{cluster.pk}:validate", token=secrets["admin"], body=body
    )
    assert response.status_code == status, response.content
    if code:
        assert response.json()["code"] == code
        assert response.json()["detail"] == "dcgmi diag 수준은 1 또는 2만 선택할 수 있습니다."
    assert snapshot() == before


def test_validate_refuses_by_the_rules(api, world, secrets):
    lonely = running_cluster(world, ["solo"])
    stopped = world.cluster("idle")
    world.members(stopped, 2)
    before = snapshot()
    one = api.post(f"/virtual-clusters/{lonely.pk}:validate", token=secrets["admin"])
    idle = api.post(
        f"/virtual-clusters/{stopped.pk}:validate",
        token=secrets["admin"],
        headers={"Accept-Language": "en"},
    )
    assert (one.status_code, one.json()["code"]) == (409, "not_enough_running_members")
    assert (idle.status_code, idle.json()["code"]) == (409, "validation_cluster_not_running")
    assert idle.headers["Content-Language"] == "en"
    assert snapshot() == before


def test_a_second_run_while_one_is_open_is_refused(api, world, secrets):
    cluster = running_cluster(world, NODES[:2])
    # Not executing the on-commit callbacks: the first run stays open.
    assert (
        api.post(f"/virtual-clusters/{cluster.pk}:validate", token=secrets["admin"]).status_code
        == 202
    )
    again = api.post(f"/virtual-clusters/{cluster.pk}:validate", token=secrets["admin"])
    assert (again.status_code, again.json()["code"]) == (409, "validation_running")
    assert again.json()["detail"] == "이 클러스터의 검증이 이미 진행 중입니다"


def test_replace_swaps_the_member_for_the_spare_at_its_rank(api, world, secrets):
    cluster = world.cluster("ranked")
    vms = [world.vm(name) for name in ("r0", "r1", "r2")]
    for vm in vms:
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    spare = world.vm("spare", billing_type=BillingType.RESERVED)
    response = api.post(
        f"/virtual-clusters/{cluster.pk}/members/{vms[1].pk}:replace",
        token=secrets["operator"],
        body={"spare_vm_id": spare.pk},
        headers={"Idempotency-Key": "swap-r1"},
    )
    assert response.status_code == 202, response.content
    operation = response.json()
    assert operation["kind"] == "replace" and operation["done"] is True
    assert [(i["target_name"], i["status"]) for i in operation["items"]] == [
        ("r1", "SUCCEEDED"),
        ("spare", "SUCCEEDED"),
    ]
    assert dict(cluster.members.values_list("name", "node_rank")) == {
        "r0": 0,
        "spare": 1,
        "r2": 2,
    }
    launch = api.get(f"/virtual-clusters/{cluster.pk}/launch", token=secrets["viewer"]).json()
    assert [(r["node_rank"], r["vm_name"]) for r in launch["ranks"]] == [
        (0, "r0"),
        (1, "spare"),
        (2, "r2"),
    ]
    again = api.post(
        f"/virtual-clusters/{cluster.pk}/members/{vms[1].pk}:replace",
        token=secrets["operator"],
        body={"spare_vm_id": spare.pk},
        headers={"Idempotency-Key": "swap-r1"},
    )
    assert again.status_code == 202 and again.json()["id"] == operation["id"]


@pytest.mark.parametrize(
    "case", ["spot_spare", "other_zone", "not_a_member", "huge_ids", "no_body"]
)
def test_replace_refusals_change_nothing(api, world, secrets, case):
    cluster = world.cluster("keep")
    member, _other = world.members(cluster, 2)
    outsider = world.vm("outsider")
    spares = {
        "spot_spare": world.vm("spot", billing_type=BillingType.SPOT),
        "other_zone": world.vm("far", zone=world.zone_b),
    }
    member_id, body = member.pk, {"spare_vm_id": outsider.pk}
    if case in spares:
        body = {"spare_vm_id": spares[case].pk}
    elif case == "not_a_member":
        member_id = outsider.pk
        body = {"spare_vm_id": world.vm("spare2").pk}
    elif case == "huge_ids":
        member_id, body = 2**62, {"spare_vm_id": 2**62}
    elif case == "no_body":
        body = None
    before = snapshot()
    response = api.post(
        f"/virtual-clusters/{cluster.pk}/members/{member_id}:replace",
        token=secrets["admin"],
        body=body,
    )
    expected = {
        "spot_spare": (409, "spot_or_dr_vm"),
        "other_zone": (409, None),
        "not_a_member": (409, "not_member"),
        "huge_ids": (404, None),
        # No spare named: the cluster's best 예비, and this one keeps none.
        "no_body": (409, "no_spare"),
    }[case]
    assert response.status_code == expected[0], response.content
    if expected[1]:
        assert response.json()["code"] == expected[1]
    assert response.json()["detail"]  # a message in the caller's language
    assert snapshot() == before
