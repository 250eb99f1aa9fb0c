"""The straggler line never blames a member for the time it was not running: a figure is a
member's mean over its own samples, a member with only a few minutes of samples in the range
is 방금 합류 and not ranked, and a member replaced by 교체 keeps its samples in the charts and
the heatmap, marked 교체됨."""

from datetime import timedelta

import pytest
from django.utils import timezone, translation

from clusters.models import ClusterStatus, Operation, OperationItem
from metrics import storage
from metrics.storage import straggler
from tests.metrics.test_straggler import page, write
from vms.models import VmStatus


@pytest.fixture
def cluster(world):
    cluster = world.cluster("late", status=ClusterStatus.RUNNING)
    world.members(cluster, 3, status=VmStatus.RUNNING)
    return cluster


def _busy(index, gpu, rng):
    return 90.0 + rng.uniform(0, 5)


def _warming_up(index, gpu, rng):
    return 30.0 + rng.uniform(0, 5)


JUST_NOW = timedelta(seconds=5)  # the newest sample's age


def write_ago(members, since, until, figure):
    """``write`` the members' samples from ``since`` ago to ``until`` ago."""
    now = timezone.now()
    write(members, now - since, now - until, figure)


def _busy_but_one(index, gpu, rng):
    """Member 0's GPU 3 runs at 70%: the cluster's one real straggler."""
    return 70.0 + rng.uniform(0, 5) if (index, gpu) == (0, 3) else _busy(index, gpu, rng)


def test_a_spare_that_joined_two_minutes_ago_is_just_joined_never_the_slowest(
    login, cluster, world
):
    """Its first minute is the warm-up (low); the others ran the whole hour at ~92%, but for
    one GPU at ~72%: that one is named, the spare is not."""
    old = list(cluster.members.order_by("name"))
    write_ago(old, timedelta(minutes=50), JUST_NOW, _busy_but_one)
    spare = world.vm("late-spare", cluster=cluster, status=VmStatus.RUNNING)
    write_ago([spare], timedelta(minutes=2), timedelta(seconds=60), _warming_up)
    write_ago([spare], timedelta(seconds=60), JUST_NOW, _busy)
    html, figures = page(login("viewer"), cluster, range="1h")
    assert "가장 느린 멤버: late-spare" not in html
    assert f"가장 느린 멤버: {old[0].name} (GPU 3)" in html
    assert 'id="metrics-joined"' in html and "late-spare" in html.split('id="metrics-joined"')[1]
    heat = figures["heatmap"]["data"][0]
    assert "late-spare (방금 합류)" in heat["y"]
    bottom = html.split('class="table metrics-bottom-table"')[1].split("</table>")[0]
    assert "late-spare" not in bottom


def test_a_member_is_judged_on_the_time_it_was_reporting_not_the_whole_range(login, cluster, world):
    """A member started 20 minutes ago at 93% would be 31% over the hour if the hour counted:
    it is ranked on its own samples, so the real straggler (70%) is the one named."""
    old = list(cluster.members.order_by("name"))
    write_ago(old, timedelta(minutes=55), JUST_NOW, lambda i, g, rng: 70.0 if i == 1 else 95.0)
    late = world.vm("late-newer", cluster=cluster, status=VmStatus.RUNNING)
    write_ago([late], timedelta(minutes=20), JUST_NOW, lambda i, g, rng: 93.0)
    html, figures = page(login("viewer"), cluster, range="1h")
    assert f"가장 느린 멤버: {old[1].name} (GPU 0)" in html
    assert "방금 합류" not in html
    assert "late-newer" in figures["heatmap"]["data"][0]["y"]


def test_a_replaced_members_samples_stay_marked_replaced(login, cluster, world):
    """Up to the moment it left: what it sent later (run alone, say) is not this cluster's."""
    now = timezone.now()
    old = list(cluster.members.order_by("name"))
    write(
        old,
        now - timedelta(minutes=40),
        now - timedelta(minutes=10),
        lambda i, g, rng: 20.0 if i == 2 else 95.0,
    )
    bad = old[2]
    bad.cluster, bad.node_rank, bad.status = None, None, VmStatus.STOPPED
    bad.save()
    left = now - timedelta(minutes=10)
    operation = Operation.objects.create(
        kind=Operation.Kind.REPLACE, project=cluster.project, cluster=cluster, finished_at=left
    )
    OperationItem.objects.create(
        operation=operation,
        position=0,
        vm=bad,
        target_name=bad.name,
        status=OperationItem.Status.SUCCEEDED,
        finished_at=left,
    )
    write([bad], left + timedelta(seconds=10), now, lambda i, g, rng: 99.0)
    html, figures = page(login("viewer"), cluster, range="1h")
    heat = figures["heatmap"]["data"][0]
    row = heat["z"][heat["y"].index(f"{bad.name} (교체됨)")]
    assert row == [20.0] * 8
    assert 'id="metrics-replaced"' in html
    assert f"가장 느린 멤버: {bad.name}" not in html
    # The members left are all at 95%: none of them is named in its place.
    assert "가장 느린 멤버:" not in html
    assert "느린 멤버 없음" in html and "모든 멤버가 최근 5분 중앙값과 10%p 이내" in html
    html, figures = page(login("viewer"), cluster, range="1h", per_member="1")
    names = [trace["name"] for trace in figures["gpu"]["data"]]
    assert f"{bad.name} (교체됨)" in names
    gpu = next(t for t in figures["gpu"]["data"] if t["name"] == f"{bad.name} (교체됨)")
    assert any(v is not None for v in gpu["y"])


def test_three_minutes_in_a_rolled_up_hour_are_still_just_joined(cluster, world):
    """7일 reads whole hours from the hour rollups: the spare's three minutes in such an hour
    count as three minutes, not as the hour."""
    hour = storage.floor_to(timezone.now(), 3600) - timedelta(hours=1)
    old = list(cluster.members.order_by("name"))
    write(old, hour - timedelta(minutes=50), hour + timedelta(minutes=59), _busy)
    spare = world.vm("late-spare", cluster=cluster, status=VmStatus.RUNNING)
    write(
        [spare], hour + timedelta(minutes=56), hour + timedelta(minutes=59), lambda i, g, rng: 40.0
    )
    storage.rollup(now=hour + timedelta(hours=1, minutes=10))
    members = [(vm.pk, vm.name) for vm in [*old, spare]]
    view = straggler.device_view(members, 7 * 86400, now=hour + timedelta(hours=1))
    assert view.joined == ["late-spare"]
    assert view.slowest.node != "late-spare"


def test_bottom_five_says_why_it_is_empty_when_every_member_just_joined(login, cluster):
    """Every member started two minutes ago: the heatmap has their GPUs, 하위 5 ranks
    nobody and says why, instead of an empty table."""
    members = list(cluster.members.order_by("name"))
    write_ago(members, timedelta(minutes=2), JUST_NOW, _busy)
    html, figures = page(login("viewer"), cluster, range="1h")
    assert "late-m" in figures["heatmap"]["data"][0]["y"][0]
    assert 'class="table metrics-bottom-table"' not in html
    reason = html.split('id="metrics-bottom-empty">')[1].split("</p>")[0]
    assert reason == (
        "멤버가 모두 방금 합류해 아직 순위를 매기지 않습니다. "
        "멤버마다 데이터가 5분 넘게 쌓이면 표시됩니다."
    )


def test_bottom_five_reason_names_replaced_members_too():
    """Joined and replaced members only: the reason names both kinds; a ranked GPU: none."""
    gpu = straggler.GpuFigure(1, "a", 0, 90.0, 40.0, 300.0)
    view = straggler.DeviceView(gpus=[gpu], joined=["a"])
    assert "방금 합류해" in view.bottom_empty_reason
    with translation.override("en"):
        assert view.bottom_empty_reason == (
            "Every member has just joined, so none is ranked yet. The list appears once "
            "each member has sent more than 5 minutes of data."
        )
    view = straggler.DeviceView(
        gpus=[gpu, straggler.GpuFigure(2, "b", 0, 80.0, 40.0, 300.0)],
        joined=["a"],
        replaced=["b"],
    )
    assert view.bottom_empty_reason.startswith("순위에 넣을 멤버가 없습니다.")
    view.bottom = [(gpu, 0.0)]
    assert view.bottom_empty_reason == ""
    assert straggler.DeviceView(gpus=[gpu]).bottom_empty_reason == (
        "이 기간에 GPU 사용률을 보낸 멤버가 없습니다."
    )
