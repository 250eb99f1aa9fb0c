"""The libvirt backend on the demo's embedded database (SQLite): `.ci/realvm-demo` runs
``rundemo --backend libvirt`` without ``DATABASE_URL``, so placement and the partition's
one-statement allocation must speak SQLite as well as PostgreSQL. Run in a child process with
its own SQLite file (the suite's database is PostgreSQL)."""

import os

import pytest

from tests.child import run_python

SCRIPT = """
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.test.utils import override_settings
from portal.compute.backends.libvirt import LibvirtBackend
from portal.compute.backends.libvirt.inventory import sync_host
from tests.libvirt_testhost import write_hosts
from portal.compute.models.hosts import FabricPartition, GpuHost, Placement
from clusters.models import VirtualCluster
from portal.models import Project
from vms.models import VirtualMachine
from portal.catalog.models import FabricOffering, InstanceType, Zone

zone = Zone.objects.create(code="kr-central-1a", name="1a")
itype = InstanceType.objects.create(
    code="gpu.h100x4", gpu_model="H100", gpu_count=4, vcpu=96, memory_gib=1024
)
project = Project.objects.create(slug="demo", name="demo")
for fabric in ("INFINIBAND", "ROCE_V2"):
    FabricOffering.objects.create(zone=zone, instance_type=itype, fabric=fabric)
    for i, uri in enumerate(write_hosts(TMP + "/" + fabric, 2)):
        sync_host(GpuHost.objects.create(name=f"{fabric}-{i}", zone=zone, uri=uri, fabric=fabric))
with override_settings(COMPUTE_BACKEND="portal.compute.backends.libvirt.LibvirtBackend"):
    backend = LibvirtBackend()
    for n, fabric in enumerate(("INFINIBAND", "ROCE_V2", "INFINIBAND")):
        cluster = VirtualCluster.objects.create(
            project=project, name=f"c{n}", zone=zone, instance_type=itype,
            fabric_type=fabric, status="PROVISIONING",
        )
        for m in range(2):
            VirtualMachine.objects.create(
                project=project, name=f"c{n}-m{m}", zone=zone, instance_type=itype,
                cluster=cluster,
            )
        backend.allocate(cluster, 2)
        backend.allocate(cluster, 2)  # again: the same partition, nothing more
rows = FabricPartition.objects.order_by("block")
print([(p.cluster.name, p.block, p.pkey, p.vlan) for p in rows])
print(Placement.objects.filter(held=True).count())
"""


@pytest.mark.slow
def test_placement_and_partitions_on_sqlite(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
    }
    done = run_python(f"TMP = {str(tmp_path)!r}\n{SCRIPT}", env, timeout=600)
    partitions, held = done.stdout.strip().splitlines()[-2:]
    assert partitions == "[('c0', 0, 256, None), ('c1', 1, None, 101), ('c2', 2, 258, None)]"
    assert held == "6"
