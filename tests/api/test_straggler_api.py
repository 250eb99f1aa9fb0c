"""GET /api/v1/virtual-clusters/{id}/straggler: the 메트릭 tab's straggler, or that the cluster
has none, in the caller's language; VM data, so VM READ as on the tab."""

from datetime import timedelta

from django.utils import timezone

from clusters.models import ClusterStatus
from tests.metrics.test_straggler import write
from vms.models import VmStatus


def test_the_straggler_is_named_only_when_there_is_one(api, world, secrets):
    cluster = world.cluster("slowish", status=ClusterStatus.RUNNING)
    members = sorted(world.members(cluster, 3, status=VmStatus.RUNNING), key=lambda vm: vm.name)
    now = timezone.now()
    path = f"/virtual-clusters/{cluster.pk}/straggler"
    # A member at -3.5 %p of the others: the slowest, but no straggler.
    write(
        members,
        now - timedelta(minutes=15),
        now - timedelta(seconds=5),
        lambda i, g, rng: 91.5 if i == 0 else 95.0,
        ports=lambda i, p: 25e9,
    )
    body = api.get(path, token=secrets["viewer"]).json()
    assert body["straggler"] is None and body["slow_port"] is None and body["judged"]
    assert body["criteria"] == {"gpu_points": 10.0, "port_percent": 20.0, "minutes": 5}
    assert body["lines"] == [
        "느린 멤버 없음 — 모든 멤버가 최근 5분 중앙값과 10%p 이내",
        "느린 포트 없음 — 모든 포트가 최근 5분 중앙값과 20% 이내",
    ]
    english = api.get(path, token=secrets["viewer"], headers={"Accept-Language": "en"}).json()
    assert english["lines"][0] == (
        "No straggler — every member within 10 pp of the median over the last 5 min"
    )


def test_a_real_straggler_is_named_with_its_gpu(api, world, secrets):
    cluster = world.cluster("slow", status=ClusterStatus.RUNNING)
    members = sorted(world.members(cluster, 3, status=VmStatus.RUNNING), key=lambda vm: vm.name)
    now = timezone.now()
    write(
        members,
        now - timedelta(minutes=15),
        now - timedelta(seconds=5),
        lambda i, g, rng: 76.0 if (i, g) == (2, 6) else 95.0,
    )
    body = api.get(f"/virtual-clusters/{cluster.pk}/straggler", token=secrets["viewer"]).json()
    assert body["straggler"] == {"vm_name": members[2].name, "device": 6, "gap": -19.0}
    assert body["lines"] == [
        f"가장 느린 멤버: {members[2].name} (GPU 6) — 최근 5분 중앙값과 -19.0%p (기준 10%p)"
    ]
