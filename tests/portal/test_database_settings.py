"""The database connection: values bound by the server, so that a statement run again with
other values is prepared once and not planned anew on every request."""

import pytest
from django.db import connection

from clusters.models import VirtualCluster
from portal.settings import database_from_url


def options(url):
    return database_from_url(url)["OPTIONS"]


def test_statements_are_bound_by_the_server_and_prepared_after_five_runs():
    assert options("postgres://u@db/portal") | {"pool": None} == {
        "pool": None,
        "server_side_binding": True,
        "prepare_threshold": 5,
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("prepare_threshold=", {"prepare_threshold": None}),  # behind pgbouncer
        ("prepare_threshold=None", {"prepare_threshold": None}),
        ("prepare_threshold=2", {"prepare_threshold": 2}),
        ("server_side_binding=false", {"server_side_binding": False}),
        ("server_side_binding=1", {"server_side_binding": True}),
    ],
)
def test_the_url_can_turn_preparing_off(query, expected):
    assert options(f"postgres://u@db/portal?{query}").items() >= expected.items()


def test_a_threshold_that_is_no_number_stops_the_start():
    with pytest.raises(ValueError, match="often"):
        database_from_url("postgres://u@db/portal?prepare_threshold=often")


@pytest.mark.django_db
def test_a_query_run_with_other_values_is_one_prepared_statement():
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's")
    for pk in range(1, 8):  # a cluster page's lookup, for seven clusters
        VirtualCluster.objects.filter(pk=pk).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ['%FROM "clusters_virtualcluster" WHERE "clusters_virtualcluster"."id" = $_ LIMIT 1'],
        )
        assert cursor.fetchone()[0] == 1
