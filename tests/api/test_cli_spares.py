"""``vc cluster spares|spare-add|spare-remove|policy`` and ``replace`` without a spare named,
over HTTP against the live test server."""

import json

import pytest

from clusters.models import ClusterSpare, Operation, VirtualCluster
from tests.api.test_cli import ok, vc  # noqa: F401  (the fixture)
from vc_cli import http

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_spares_and_policy_through_the_cli(vc, world):  # noqa: F811
    cluster = world.cluster("pool")
    world.members(cluster, 2, prefix="pool-m")
    world.vm("kept-01")
    ok(vc("cluster", "spare-add", "pool", "kept-01"))
    assert list(ClusterSpare.objects.values_list("vm__name", flat=True)) == ["kept-01"]
    listed = ok(vc("cluster", "spares", "pool"))
    assert "kept-01" in listed and "pool-m0" not in listed
    code, _out, err = vc("cluster", "spare-add", "pool", "pool-m0")
    assert code == http.EXIT_REFUSED and "이미 다른 클러스터에 연결된" in err

    assert json.loads(ok(vc("-o", "json", "cluster", "policy", "pool")))["policy"] == "notify"
    ok(vc("cluster", "policy", "pool", "--set", "propose"))
    cluster = VirtualCluster.objects.get(pk=cluster.pk)
    assert cluster.policy == "propose" and cluster.policy_set_by == world.admin
    shown = json.loads(ok(vc("-o", "json", "cluster", "policy", "pool")))
    assert shown["policy_label"] == "교체 제안" and shown["set_by"] == "admin"

    ok(vc("cluster", "replace", "pool", "pool-m1"))
    assert dict(cluster.members.values_list("name", "node_rank")) == {"pool-m0": 0, "kept-01": 1}
    code, _out, err = vc("cluster", "replace", "pool", "pool-m0")
    assert code == http.EXIT_REFUSED and "쓸 수 있는 예비 가상머신이 없습니다" in err
    world.vm("kept-02")
    ok(vc("cluster", "spare-add", "pool", "kept-02"))
    ok(vc("cluster", "spare-remove", "pool", "kept-02"))
    assert not ClusterSpare.objects.exists()
    done = Operation.objects.filter(kind=Operation.Kind.SPARE_REMOVE).get()
    code, _out, err = vc("op", "cancel", str(done.pk))
    assert code == http.EXIT_REFUSED and "취소할 수 없습니다" in err
