"""The cluster list keeps the rows it drew, each under what it shows: a kept row must be
the row drawn anew, whatever changed since it was kept (any column, the language), and the
rows kept stay bounded."""

from datetime import timedelta

import pytest
from django.conf import settings

from clusters.models import ClusterStatus, VirtualCluster
from clusters.templatetags import cluster_tags
from portal.catalog.models import FabricType


@pytest.fixture(autouse=True)
def _nothing_kept():
    cluster_tags.forget_rows()
    yield
    cluster_tags.forget_rows()


def rows_of(client) -> str:
    page = client.get("/clusters/").content.decode()
    return page.split("<tbody>")[1].split("</tbody>")[0]


def drawn_anew(client) -> str:
    cluster_tags.forget_rows()
    return rows_of(client)


@pytest.fixture
def listed(world, login):
    """Two clusters, the list seen once by an admin."""
    train = world.cluster("train")
    world.cluster("infer", zone=world.zone_b)
    client = login("admin")
    first = rows_of(client)
    assert len(cluster_tags._ROWS) == 2
    return client, train, first


def test_a_kept_row_is_the_row_drawn_anew(listed):
    client, _train, first = listed
    assert rows_of(client) == first == drawn_anew(client)


CHANGES = {
    "name": lambda world, c: {"name": "train-2"},
    "status": lambda world, c: {"status": ClusterStatus.RUNNING},
    "fabric": lambda world, c: {"fabric_type": FabricType.ROCE_V2},
    "type": lambda world, c: {"instance_type": world.l40s},
    "zone": lambda world, c: {"zone": world.zone_b},
    "created": lambda world, c: {"created_at": c.created_at - timedelta(minutes=5)},
}


@pytest.mark.parametrize("column", [*CHANGES, "members"])
def test_a_column_changed_is_drawn_anew(world, listed, column):
    client, train, first = listed
    if column == "members":
        world.members(train, 2)
    else:  # written past the services, as another process or the admin might
        VirtualCluster.objects.filter(pk=train.pk).update(**CHANGES[column](world, train))
    kept = rows_of(client)
    assert kept != first
    assert kept == drawn_anew(client)


def test_the_other_language_is_drawn_in_it(listed):
    client, _train, first = listed
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    english = rows_of(client)
    assert "Unallocated" in english and "미할당" not in english
    assert english == drawn_anew(client)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "ko"
    assert rows_of(client) == first


def test_the_rows_kept_stay_bounded(listed, monkeypatch):
    client, _train, first = listed
    monkeypatch.setattr(cluster_tags._ROWS, "most", 1)
    cluster_tags.forget_rows()
    assert rows_of(client) == first
    assert len(cluster_tags._ROWS) <= 1
