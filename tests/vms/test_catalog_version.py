"""The list filters' zones are kept per process under the catalog's version, read with the
request's user: the next request after any change to the catalog shows it, however the
change was made, and a request with the catalog unchanged reads no zone at all. The triggers
are the migration's: migrated back they are gone (and the version with them, so nothing is
kept), forward again they are back and never repeat a number; a flush raises the number too."""

import re

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

from portal.catalog import version as catalog_version
from portal.catalog.models import FabricOffering, FabricType, InstanceType, Zone
from portal.iam.auth import read_with

# The version is PostgreSQL's (its migration does nothing on SQLite, where nothing is kept).
POSTGRESQL_ONLY = pytest.mark.postgres_only(
    "the catalog's version is PostgreSQL's (its triggers and sequence; none on SQLite)"
)


def zone_filter(client, url="/clusters/") -> tuple[list[str], int]:
    """The zone filter's options (their labels) on the list at ``url``, and how many queries
    the request made."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    select = re.search(r'<select name="zone"[^>]*>(.*?)</select>', response.content.decode(), re.S)
    labels = re.findall(r"<option[^>]*>([^<]*)</option>", select.group(1))
    return labels[1:], len(captured)


@pytest.fixture
def admin(login):
    client = login("admin")
    zone_filter(client)  # the zones of this catalog, kept
    return client


@POSTGRESQL_ONLY
def test_an_unchanged_catalog_is_not_read_again(world, admin):
    labels, warm = zone_filter(admin)
    assert labels == ["kr-central-1a", "kr-central-1b"]
    assert zone_filter(admin) == (labels, warm)
    # The VM list offers the same zones: kept once for both lists.
    vms_labels, vms_warm = zone_filter(admin, "/vms/")
    assert vms_labels == labels
    Zone.objects.create(code="kr-central-1c", name="1c")
    assert zone_filter(admin, "/vms/")[1] == vms_warm + 1  # changed: the zones read once
    assert zone_filter(admin)[1] == warm  # and kept for the cluster list


@POSTGRESQL_ONLY
def test_a_zone_added_shows_at_the_next_request(world, admin):
    warm = zone_filter(admin)[1]
    Zone.objects.create(code="kr-central-1c", name="1c")
    assert zone_filter(admin) == (["kr-central-1a", "kr-central-1b", "kr-central-1c"], warm + 1)
    assert zone_filter(admin)[1] == warm


def test_a_zone_changed_by_a_queryset_update_or_by_hand_in_sql_shows(world, admin):
    Zone.objects.filter(pk=world.zone_b.pk).update(code="kr-south-1b")
    assert zone_filter(admin)[0] == ["kr-central-1a", "kr-south-1b"]
    with connection.cursor() as cursor:
        cursor.execute("UPDATE vms_zone SET code = 'kr-east-1a' WHERE id = %s", [world.zone_a.pk])
    assert zone_filter(admin)[0] == ["kr-east-1a", "kr-south-1b"]


def test_a_zone_deleted_is_gone_at_the_next_request(world, admin):
    Zone.objects.create(code="kr-central-1c", name="1c")
    assert "kr-central-1c" in zone_filter(admin)[0]
    Zone.objects.filter(code="kr-central-1c").delete()
    assert zone_filter(admin)[0] == ["kr-central-1a", "kr-central-1b"]


@POSTGRESQL_ONLY
def test_instance_types_and_offerings_are_the_catalog_too(world, admin):
    before = catalog_version.current(admin_user(admin))
    InstanceType.objects.filter(pk=world.h100.pk).update(vcpu=200)
    after_type = catalog_version.current(admin_user(admin))
    FabricOffering.objects.filter(
        zone=world.zone_b, instance_type=world.l40s, fabric=FabricType.ROCE_V2
    ).delete()
    after_offering = catalog_version.current(admin_user(admin))
    assert before < after_type < after_offering


def test_a_change_rolled_back_never_lends_its_number_to_a_later_change(world, admin):
    """The process that made a change reads it in its own transaction, and keeps it under
    the change's number; rolled back, that number is never the catalog's."""
    with pytest.raises(RuntimeError), transaction.atomic():  # noqa: PT012 - the rollback is what is tested
        Zone.objects.create(code="kr-ghost-1a", name="ghost")
        assert "kr-ghost-1a" in zone_filter(admin)[0]
        raise RuntimeError("rolled back")
    assert zone_filter(admin)[0] == ["kr-central-1a", "kr-central-1b"]
    Zone.objects.create(code="kr-central-1c", name="1c")
    assert zone_filter(admin)[0] == ["kr-central-1a", "kr-central-1b", "kr-central-1c"]


@POSTGRESQL_ONLY
@pytest.mark.django_db(transaction=True)
def test_a_change_committed_by_another_process_shows_at_the_next_request(world, admin):
    warm = zone_filter(admin)[1]
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"],
        user=settings["USER"],
        dbname=settings["NAME"],
        autocommit=True,
    ) as other:
        other.execute("INSERT INTO vms_zone (code, name) VALUES ('kr-west-1a', 'w')")
    assert zone_filter(admin) == (["kr-central-1a", "kr-central-1b", "kr-west-1a"], warm + 1)


def version() -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(catalog_version.VERSION_SQL)
        row = cursor.fetchone()
    return row[0] if row else None


def migrate(target: str) -> None:
    """Migrate the vms app to ``target``, back or forward, inside the test's transaction:
    PostgreSQL's DDL rolls back with it, so the test database is left as it was."""
    MigrationExecutor(connection).migrate([("vms", target)])


@POSTGRESQL_ONLY
def test_migrated_back_nothing_is_kept_and_forward_again_the_numbers_go_on(world):
    before = version()
    migrate("0005_catalog_version")
    Zone.objects.create(code="kr-central-1c", name="1c")
    assert version() is None
    migrate("0006_catalog_version_triggers")
    after = version()
    assert after > before
    Zone.objects.filter(code="kr-central-1c").update(name="c")
    assert version() > after


@POSTGRESQL_ONLY
def test_a_flush_raises_the_number(world):
    """A transactional test's teardown flushes the tables, the version's row among them."""
    before = version()
    with connection.cursor() as cursor:  # no TRUNCATE with the test's FK checks pending
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    call_command("flush", interactive=False, verbosity=0)
    assert not Zone.objects.exists()
    assert version() > before


@pytest.mark.skipif(connection.vendor == "postgresql", reason="SQLite's")
def test_on_sqlite_the_zones_are_read_at_every_request(world, admin):
    assert version() is None
    for _ in range(2):
        with CaptureQueriesContext(connection) as captured:
            assert zone_filter(admin)[0] == ["kr-central-1a", "kr-central-1b"]
        assert sum('FROM "vms_zone"' in query["sql"] for query in captured) == 1


def test_without_a_version_nothing_is_kept():
    reads = []
    for _ in range(2):
        catalog_version.kept("k", None, lambda: reads.append(1))
    assert len(reads) == 2
    for _ in range(2):
        catalog_version.kept("k", -1, lambda: reads.append(1) or "kept")
    assert len(reads) == 3


def admin_user(client):
    """The user as the next request reads it, with the catalog's version."""
    from django.contrib.auth import get_user
    from django.http import HttpRequest

    request = HttpRequest()
    request.session = client.session
    user = get_user(request)
    assert read_with(user, catalog_version.READ_AS) is not None
    return user
