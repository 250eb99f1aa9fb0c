"""Reads: the catalog, cluster and VM lists (keyset pages, filters, order) and details,
members, hostfile and launch lines — each the console's data, as JSON."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import ClusterStatus
from portal.catalog.models import FabricType
from portal.models import Role, RoleBinding
from vms.models import VmStatus

pytestmark = pytest.mark.django_db


def names(response):
    assert response.status_code == 200, response.content
    return [item["name"] for item in response.json()["items"]]


def test_instance_types_name_the_fabrics_of_each_zone(api, secrets, world):
    types = api.get("/instance-types?zone=kr-central-1b", token=secrets["viewer"]).json()
    by_code = {t["code"]: t["offerings"] for t in types}
    assert by_code == {
        "gpu.h100x8": [
            {
                "zone_id": world.zone_b.pk,
                "zone": "kr-central-1b",
                "fabrics": ["INFINIBAND", "ROCE_V2"],
            }
        ],
        "gpu.l40sx4": [
            {"zone_id": world.zone_b.pk, "zone": "kr-central-1b", "fabrics": ["ROCE_V2"]}
        ],
    }
    assert api.get("/instance-types?zone=nowhere", token=secrets["viewer"]).json() == []


def test_keyset_pages_walk_every_row_once_in_order(api, secrets, world):
    for i in range(7):
        world.cluster(f"c{i}")
    token, seen = None, []
    for expected in (3, 3, 1):
        query = "?page_size=3&order_by=name" + (f"&page_token={token}" if token else "")
        body = api.get(f"/virtual-clusters{query}", token=secrets["viewer"]).json()
        assert len(body["items"]) == expected
        seen += [c["name"] for c in body["items"]]
        token = body["next_page_token"]
    assert token is None
    assert seen == [f"c{i}" for i in range(7)]
    newest_first = names(api.get("/virtual-clusters", token=secrets["viewer"]))
    assert newest_first == [f"c{i}" for i in reversed(range(7))]


@pytest.mark.parametrize(
    ("query", "code", "field"),
    [
        ("page_size=0", "request_invalid", "page_size"),
        ("page_size=501", "request_invalid", "page_size"),
        ("page_size=x", "request_invalid", "page_size"),
        ("order_by=status", "request_invalid", "order_by"),
        ("status=BROKEN", "request_invalid", "status"),
    ],
)
def test_bad_list_requests_are_422(api, secrets, world, query, code, field):
    response = api.get(f"/virtual-clusters?{query}", token=secrets["viewer"])
    assert response.status_code == 422
    assert (response.json()["code"], response.json()["field"]) == (code, field)


def _forged(payload):
    """A token of the old shape, signed with this deployment's own key (as anyone who knows
    the development key can)."""
    from django.core import signing

    return signing.dumps(payload, salt="portal.api.page", compress=True)


@pytest.mark.parametrize(
    "token",
    [
        "forged",
        "1:AAAA",
        lambda: _forged(["name", False, ["a", "b"], 1]),
        lambda: _forged(["name", False, "c0", "1 OR 1=1"]),
        lambda: _forged(["name", False, "c0", 2**70]),
        lambda: _forged(["created_at", True, {"x": 1}, 1]),
        lambda: _forged(["created_at", True, {"t": "not a time"}, 1]),
        lambda: _forged(["name", False, None, None]),
        lambda: _forged({"a": 1}),
    ],
)
def test_a_bad_page_token_is_a_400_problem(api, secrets, world, token):
    world.cluster("c0")
    token = token() if callable(token) else token
    for order in ("name", "-created_at"):
        response = api.get(
            f"/virtual-clusters?order_by={order}&page_token={token}", token=secrets["viewer"]
        )
        assert response.status_code == 400, response.content
        assert response["Content-Type"] == "application/problem+json"
        assert (response.json()["code"], response.json()["field"]) == (
            "page_token_invalid",
            "page_token",
        )


def test_a_page_token_carries_no_readable_data(api, secrets, world):
    """The token names the last row by its id only: not its name, not its time."""
    import base64
    import zlib

    for name in ("secret-alpha-name", "secret-beta-name"):
        world.cluster(name)
    for order in ("name", "-created_at"):
        token = api.get(
            f"/virtual-clusters?order_by={order}&page_size=1", token=secrets["viewer"]
        ).json()["next_page_token"]
        readable = [token]
        for part in token.replace(".", ":").split(":"):
            try:
                raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
            except ValueError:
                continue
            readable.append(raw.decode("utf-8", "replace"))
            try:
                readable.append(zlib.decompress(raw).decode("utf-8", "replace"))
            except zlib.error:
                pass
        text = " ".join(readable)
        assert "secret" not in text and "name" not in text and "202" not in text, text


def test_a_page_token_of_another_order_or_list_is_refused(api, secrets, world):
    for i in range(3):
        world.cluster(f"c{i}")
    token = api.get("/virtual-clusters?page_size=1", token=secrets["viewer"]).json()[
        "next_page_token"
    ]
    response = api.get(
        f"/virtual-clusters?order_by=name&page_token={token}", token=secrets["viewer"]
    )
    assert response.json()["code"] == "page_token_invalid"
    # Nor with another list in the same order.
    other_list = api.get(
        f"/operations?order_by=-created_at&page_token={token}", token=secrets["viewer"]
    )
    assert (other_list.status_code, other_list.json()["code"]) == (400, "page_token_invalid")


def test_filters_as_on_the_console(api, secrets, world):
    world.cluster("alpha")
    world.cluster("beta-b", zone=world.zone_b)
    world.cluster("gone", status=ClusterStatus.DELETED)
    token = secrets["viewer"]
    assert names(api.get("/virtual-clusters?order_by=name", token=token)) == ["alpha", "beta-b"]
    assert names(api.get("/virtual-clusters?status=DELETED", token=token)) == ["gone"]
    assert names(api.get("/virtual-clusters?zone=kr-central-1b", token=token)) == ["beta-b"]
    assert names(api.get("/virtual-clusters?name=ALP", token=token)) == ["alpha"]
    assert names(api.get("/virtual-clusters?instance_type=gpu.l40sx4", token=token)) == []


def test_cluster_json_counts_members_and_speaks_the_callers_language(api, secrets, world):
    cluster = world.cluster("train", status=ClusterStatus.RUNNING)
    world.members(cluster, 3)
    cluster.members.filter(name="train-m0").update(status=VmStatus.RUNNING)
    from portal.foundation.errors import CapacityUnavailable

    cluster.set_error(CapacityUnavailable())
    cluster.save()
    body = api.get(
        f"/virtual-clusters/{cluster.pk}",
        token=secrets["viewer"],
        headers={"Accept-Language": "en"},
    ).json()
    assert (body["member_count"], body["running_member_count"]) == (3, 1)
    assert (body["status"], body["status_label"]) == ("RUNNING", "Running")
    assert body["last_error"]["code"] == "capacity_unavailable"
    assert body["created_at"].endswith("Z") or body["created_at"].endswith("+00:00")
    korean = api.get(f"/virtual-clusters/{cluster.pk}", token=secrets["viewer"]).json()
    assert korean["status_label"] == "실행중"
    assert korean["last_error"]["message"] == CapacityUnavailable().message


def test_the_list_costs_the_same_queries_at_any_size(api, secrets, world):
    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert api.get("/virtual-clusters", token=secrets["viewer"]).status_code == 200
        return len(captured)

    world.members(world.cluster("first"), 2)
    api.get("/zones", token=secrets["viewer"])  # last_used_at written: not counted below
    small = queries()
    for i in range(60):
        world.members(world.cluster(f"more{i}"), 2)
    assert queries() == small <= 2


def test_members_hostfile_and_launch_lines_are_the_info_tabs(api, login, secrets, world):
    cluster = world.cluster("ib", status=ClusterStatus.RUNNING, fabric_type=FabricType.INFINIBAND)
    members = world.members(cluster, 2)
    for i, vm in enumerate(members):
        vm.private_ip = f"10.0.0.{i + 10}"
        vm.status = VmStatus.RUNNING
        vm.save()
    token = secrets["viewer"]
    assert names(api.get(f"/virtual-clusters/{cluster.pk}/members", token=token)) == [
        "ib-m0",
        "ib-m1",
    ]
    hostfile = api.get(f"/virtual-clusters/{cluster.pk}/hostfile", token=token)
    assert hostfile["Content-Type"].startswith("text/plain")
    assert hostfile.content.decode() == ("10.0.0.10 slots=8  # ib-m0\n10.0.0.11 slots=8  # ib-m1\n")
    launch = api.get(f"/virtual-clusters/{cluster.pk}/launch", token=token).json()
    assert launch["master_addr"] == "10.0.0.10" and launch["nnodes"] == 2
    assert launch["nccl_env"]["NCCL_IB_HCA"] == "mlx5"
    page = login("viewer").get(f"/clusters/{cluster.pk}/").content.decode()
    for rank in launch["ranks"]:
        assert rank["command"] in page


def test_vms_list_and_detail_hide_the_cluster_from_who_cannot_read_clusters(api, world):
    from portal.iam import tokens

    cluster = world.cluster("c")
    (member,) = world.members(cluster, 1)
    world.vm("loose")
    world.vm("gone", status=VmStatus.DELETED)
    role = Role.objects.create(name="vm-reader", permissions=["Resource.VirtualMachine.READ"])
    RoleBinding.objects.filter(user=world.users["viewer"]).update(role=role)
    _t, secret = tokens.issue_token(user=world.users["viewer"], project_id=world.demo.pk, name="v")
    listed = api.get("/virtual-machines", token=secret).json()["items"]
    assert [(v["name"], v["cluster_id"]) for v in listed] == [("c-m0", None), ("loose", None)]
    assert api.get(f"/virtual-machines/{member.pk}", token=secret).json()["cluster_id"] is None
    gone = world.vm("gone2", status=VmStatus.DELETED)
    assert api.get(f"/virtual-machines/{gone.pk}", token=secret).status_code == 404
    assert api.get(f"/virtual-clusters/{cluster.pk}", token=secret).status_code == 404


def test_vm_list_filters_by_cluster(api, secrets, world):
    cluster = world.cluster("c")
    world.members(cluster, 2)
    world.vm("loose")
    token = secrets["viewer"]
    assert names(api.get(f"/virtual-machines?cluster={cluster.pk}", token=token)) == [
        "c-m0",
        "c-m1",
    ]
    assert names(api.get("/virtual-machines?cluster=99999999999999999999", token=token)) == []
