"""The 연결된 가상머신 tab keeps the rows it drew, each under what it shows: a kept row must
be the row drawn anew, whatever changed since it was kept (the member, its controls, the
cluster, the language), and the rows kept stay bounded."""

import pytest
from django.conf import settings

from clusters.models import ClusterStatus
from clusters.templatetags import member_table
from clusters.templatetags.member_table import ClusterShown, RowFrame, Shown
from vms.models import BillingType, VmStatus


@pytest.fixture(autouse=True)
def _nothing_kept():
    member_table.forget_rows()
    yield
    member_table.forget_rows()


def rows_of(client, cluster) -> str:
    page = client.get(f"/clusters/{cluster.pk}/vms/").content.decode()
    return page.split('<tbody role="rowgroup">')[1].split("</tbody>")[0]


def drawn_anew(client, cluster) -> str:
    member_table.forget_rows()
    return rows_of(client, cluster)


@pytest.fixture
def tab(world, login):
    """A running cluster of three stopped members, its tab seen once by an operator."""
    cluster = world.cluster("ops", status=ClusterStatus.RUNNING)
    members = world.members(cluster, 3)
    client = login("operator")
    first = rows_of(client, cluster)
    assert len(member_table._ROWS) == 3
    return client, cluster, members, first


def test_a_kept_row_is_the_row_drawn_anew(tab):
    client, cluster, _members, first = tab
    assert rows_of(client, cluster) == first
    assert drawn_anew(client, cluster) == first


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("name", "renamed-node", "renamed-node"),
        ("status", VmStatus.RUNNING, 'data-status="RUNNING"'),
        ("private_ip", "10.9.8.7", "10.9.8.7"),
        ("fabric_guid", "0xfeedface00000001", "GUID 0xfeedface00000001"),
        ("billing_type", BillingType.ON_DEMAND, "온디맨드"),
    ],
)
def test_a_member_changed_is_drawn_anew(tab, field, value, shown):
    client, cluster, members, first = tab
    member = members[1]
    if field == "billing_type":  # the fixture's members are on-demand: go the other way
        member.billing_type = BillingType.RESERVED
        member.save()
        first = rows_of(client, cluster)
    setattr(member, field, value)
    member.save()
    after = rows_of(client, cluster)
    assert after != first and shown in after
    assert after == drawn_anew(client, cluster)


def test_a_member_changed_elsewhere_changes_its_neighbours_controls(tab):
    """A running cluster keeps 2 members: with 3, each stopped member may be detached; once
    one is gone (detached elsewhere), the other rows' 분리 is disabled, with the reason."""
    client, cluster, members, first = tab
    members[0].cluster = None
    members[0].save()
    after = rows_of(client, cluster)
    assert "disabled" in after and 'aria-describedby="detach-reason-1"' in after
    assert after == drawn_anew(client, cluster)


def test_the_cluster_renamed_changes_the_detach_question(tab):
    client, cluster, _members, first = tab
    cluster.name = "renamed-cluster"
    cluster.save()
    after = rows_of(client, cluster)
    assert "renamed-cluster에서 분리합니다" in after and "ops에서" not in after
    assert after == drawn_anew(client, cluster)


def test_the_cluster_stopped_changes_what_the_rows_offer(tab):
    client, cluster, _members, first = tab
    assert "data-startable" in first
    cluster.status = ClusterStatus.TERMINATED
    cluster.save()
    after = rows_of(client, cluster)
    assert "data-startable" not in after
    assert after == drawn_anew(client, cluster)


def test_the_other_language_is_drawn_in_it(tab):
    client, cluster, _members, first = tab
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    english = rows_of(client, cluster)
    assert "Stopped" in english and "중지됨" not in english
    assert english == drawn_anew(client, cluster)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "ko"
    assert rows_of(client, cluster) == first


def test_a_reader_without_update_gets_rows_without_controls(tab, login):
    _client, cluster, _members, first = tab
    viewer = rows_of(login("viewer"), cluster)
    assert "data-startable" in first and "<button" in first
    assert "checkbox" not in viewer and "<button" not in viewer


def test_the_rows_kept_stay_bounded(tab, monkeypatch):
    client, cluster, members, first = tab
    monkeypatch.setattr(member_table._ROWS, "most", 2)
    member_table._ROWS.clear()
    assert rows_of(client, cluster) == first
    assert len(member_table._ROWS) <= 2


def test_the_frames_kept_stay_bounded_and_take_their_rows_with_them(tab, monkeypatch):
    client, cluster, _members, first = tab
    monkeypatch.setattr(member_table._FRAMES, "most", 1)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    rows_of(client, cluster)
    assert len(member_table._FRAMES) == 1
    assert all(frame in member_table._FRAMES.values() for frame, _shown in member_table._ROWS)


def test_a_row_is_drawn_from_what_it_shows_alone():
    """No model, no query: the frame and the row read nothing but ``ClusterShown`` and
    ``Shown`` (a row that read more of a member than its key would be kept stale)."""
    frame = RowFrame(ClusterShown(7, "c<1>", ClusterStatus.RUNNING), True, ("사유",))
    row = frame.row(
        Shown(
            3,
            "n<&>",
            2,
            VmStatus.STOPPED,
            "",
            "",
            BillingType.ON_DEMAND,
            True,
            False,
            "사유",
            "-",
            True,
        )
    )
    assert 'data-vm="n&lt;&amp;&gt;"' in row and "c&lt;1&gt;에서 분리합니다" in row
    assert 'aria-describedby="detach-reason-1"' in row and "data-startable" in row
    assert 'formaction="/vms/3/start/"' in row and 'class="row-queued"' in row
