"""The fast tier's world: GPU hosts on libvirt's test driver (8 H100s and 8 ConnectX VFs
each, over 2 NUMA nodes), synced into the database, with the libvirt backend selected."""

import pytest

from portal.catalog.models import FabricOffering, FabricType, InstanceType
from portal.compute.backends.libvirt import connection
from portal.compute.backends.libvirt.inventory import sync_host
from portal.compute.models.hosts import GpuHost
from tests.libvirt_testhost import write_hosts

# name: (block, leaf)
TOPOLOGY = {"h0": ("b1", "l1"), "h1": ("b1", "l1"), "h2": ("b1", "l2"), "h3": ("b2", "l3")}


class Hosts:
    def __init__(self, world, tmp_path):
        self.world = world
        self.tmp = tmp_path
        self.h100x4 = InstanceType.objects.create(
            code="gpu.h100x4", gpu_model="H100", gpu_count=4, vcpu=96, memory_gib=1024
        )
        for fabric in FabricType.values:
            FabricOffering.objects.create(
                zone=world.zone_a, instance_type=self.h100x4, fabric=fabric
            )
        self.uris = []

    def add(self, name, fabric=FabricType.INFINIBAND, block="b1", leaf="l1", **kw):
        (uri,) = write_hosts(self.tmp / name, 1)
        self.uris.append(uri)
        host = GpuHost.objects.create(
            name=name,
            zone=self.world.zone_a,
            uri=uri,
            fabric=fabric,
            block=block,
            leaf=leaf,
            rack=f"r-{name}",
            **kw,
        )
        sync_host(host)
        return host

    def topology(self, fabric=FabricType.INFINIBAND, prefix=""):
        return [
            self.add(f"{prefix}{name}", fabric, block, leaf)
            for name, (block, leaf) in TOPOLOGY.items()
        ]

    def conn(self, host):
        return connection.connect(host)

    def close(self):
        for uri in self.uris:
            connection.forget(uri)


@pytest.fixture
def commits(django_capture_on_commit_callbacks, monkeypatch):
    """Queued tasks run (eagerly) when each service's transaction would have committed."""
    import portal.foundation.kernel

    def run_now(func):
        with django_capture_on_commit_callbacks(execute=True):
            func()

    original = portal.foundation.kernel.transaction.on_commit
    monkeypatch.setattr(portal.foundation.kernel.transaction, "on_commit", run_now)
    return original  # for a test that needs the callbacks at the real commit


@pytest.fixture
def hosts(world, tmp_path, settings, commits):
    settings.COMPUTE_BACKEND = "portal.compute.backends.libvirt.LibvirtBackend"
    h = Hosts(world, tmp_path)
    yield h
    h.close()
