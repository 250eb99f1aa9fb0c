"""Shared fixtures: the demo-like world in one line, users per role, a logged-in client."""

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import translation

from clusters.models import ClusterStatus, VirtualCluster
from portal.catalog.models import FabricOffering, FabricType, InstanceType, Zone
from portal.compute.models import SimulatorCapacity
from portal.iam.permissions import BUILTIN_ROLES
from portal.models import Project, Role, RoleBinding
from vms.models import BillingType, VirtualMachine, VmStatus

PASSWORD = "test-pass-1234"


def builtin_role(name):
    """The data migration's role; transactional tests flush it, so make it again if needed."""
    role, _created = Role.objects.get_or_create(
        name=name, defaults={"permissions": sorted(BUILTIN_ROLES[name])}
    )
    return role


class World:
    """Catalog, projects ``demo`` and ``other``, one user per role, factories for the rest."""

    def __init__(self):
        User = get_user_model()
        self.zone_a = Zone.objects.create(code="kr-central-1a", name="1a")
        self.zone_b = Zone.objects.create(code="kr-central-1b", name="1b")
        self.h100 = InstanceType.objects.create(
            code="gpu.h100x8", gpu_model="H100", gpu_count=8, vcpu=192, memory_gib=2048
        )
        self.l40s = InstanceType.objects.create(
            code="gpu.l40sx4", gpu_model="L40S", gpu_count=4, vcpu=64, memory_gib=512
        )
        for zone in (self.zone_a, self.zone_b):
            for fabric in FabricType.values:
                FabricOffering.objects.create(zone=zone, instance_type=self.h100, fabric=fabric)
            FabricOffering.objects.create(
                zone=zone, instance_type=self.l40s, fabric=FabricType.ROCE_V2
            )
        self.demo = Project.objects.create(slug="demo", name="demo")
        self.other = Project.objects.create(slug="other", name="other")
        self.users = {}
        for name, project, role in (
            ("admin", self.demo, "admin"),
            ("operator", self.demo, "operator"),
            ("viewer", self.demo, "viewer"),
            ("other", self.other, "admin"),
        ):
            user = User.objects.create_user(name, password=PASSWORD)
            RoleBinding.objects.create(user=user, project=project, role=builtin_role(role))
            self.users[name] = user
        self.users["norole"] = User.objects.create_user("norole", password=PASSWORD)
        self.admin = self.users["admin"]

    def cluster(self, name="train", project=None, status=ClusterStatus.UNALLOCATED, **kw):
        kw.setdefault("zone", self.zone_a)
        kw.setdefault("instance_type", self.h100)
        kw.setdefault("fabric_type", FabricType.INFINIBAND)
        return VirtualCluster.objects.create(
            project=project or self.demo, name=name, status=status, **kw
        )

    def vm(self, name="node", project=None, **kw):
        kw.setdefault("zone", self.zone_a)
        kw.setdefault("instance_type", self.h100)
        kw.setdefault("billing_type", BillingType.ON_DEMAND)
        kw.setdefault("status", VmStatus.STOPPED)
        return VirtualMachine.objects.create(project=project or self.demo, name=name, **kw)

    def members(self, cluster, count, status=VmStatus.STOPPED, prefix=None):
        prefix = prefix or f"{cluster.name}-m"
        ranked = VirtualMachine.objects.filter(cluster=cluster).count()  # ranks, as attach gives
        return [
            self.vm(
                f"{prefix}{i}",
                project=cluster.project,
                cluster=cluster,
                node_rank=ranked + i,
                status=status,
                zone=cluster.zone,
                instance_type=cluster.instance_type,
            )
            for i in range(count)
        ]

    def placed(self, name, **kw):
        """What the create services take to make ``name``: demo's admin, 8 × H100 in zone
        a, unless ``kw`` says otherwise."""
        return {
            "actor": self.admin,
            "project": self.demo,
            "name": name,
            "zone_id": self.zone_a.pk,
            "instance_type_id": self.h100.pk,
            **kw,
        }

    def new_cluster(self, name, **kw):
        """``create_cluster``'s arguments: ``placed``, over InfiniBand."""
        return self.placed(name, **{"fabric_type": FabricType.INFINIBAND, **kw})

    def new_vms(self, name, count, **kw):
        """``create_vms``' arguments: ``count`` on-demand VMs, ``placed``."""
        return self.placed(name, **{"count": count, "billing_type": BillingType.ON_DEMAND, **kw})

    def capacity(self, nodes, zone=None, instance_type=None, fabric=FabricType.INFINIBAND):
        SimulatorCapacity.objects.update_or_create(
            zone=zone or self.zone_a,
            instance_type=instance_type or self.h100,
            fabric=fabric,
            defaults={"total_nodes": nodes},
        )


def pytest_runtest_setup(item):
    """A test marked ``postgres_only(reason)`` asks what only PostgreSQL can answer: on SQLite
    (the suite without DATABASE_URL) it is skipped, saying why."""
    marker = item.get_closest_marker("postgres_only")
    if marker is None:
        return
    reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
    if not reason:
        pytest.fail(f"{item.nodeid}: postgres_only needs a reason", pytrace=False)
    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        pytest.skip(f"PostgreSQL only: {reason}")


@pytest.fixture
def world(db):
    return World()


@pytest.fixture
def login(client, world):
    """``login("viewer")`` logs the test client in as that user and returns the client."""

    def _login(username):
        client.force_login(world.users[username])
        return client

    return _login


@pytest.fixture(autouse=True)
def _no_simulator_faults():
    from portal.compute.backends.simulator import SimulatorBackend

    SimulatorBackend.faults.clear()
    SimulatorBackend.hooks.clear()
    yield
    SimulatorBackend.faults.clear()
    SimulatorBackend.hooks.clear()


@pytest.fixture(autouse=True)
def _default_language():
    """Each test starts in the console's default language (Korean). A request the test
    client served in English leaves its thread in English (the locale middleware activates a
    language per request and nothing resets it), and a later test's own gettext (a verdict's
    reason, a message) read English only when it ran after such a test."""
    translation.activate(settings.LANGUAGE_CODE)
    yield
    translation.deactivate()


@pytest.fixture
def receiver():
    """A real HTTP receiver of webhooks on 127.0.0.1 (``tests.webhook_receiver``)."""
    from tests.webhook_receiver import running_receiver

    with running_receiver() as state:
        yield state


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A redis-server of this test module's own (tests.faults.harness): no other run of the
    suite on this machine sends to it, takes from it or flushes it."""
    from tests.faults.harness import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.kill()


@pytest.fixture
def redis_worker(redis_server):
    """A worker thread (``thread_worker``) on the module's private Redis: a shared database
    would let another run of the suite take this run's tasks, or flush them."""
    from django.db import connection

    from portal.celery import app
    from tests.faults.harness import thread_worker

    redis_server.flush()  # nothing left over from an earlier test
    with thread_worker(app, redis_server.url):
        yield
    connection.close()
