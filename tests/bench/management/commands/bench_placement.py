"""``manage.py bench_placement``: the libvirt backend's placement of 256 members over 64 GPU
hosts (libvirt's test driver: 8 H100s and 8 ConnectX VFs a host over 2 NUMA nodes; 4 blocks
× 4 leaves × 4 hosts). 32 clusters of 8 members of a 2-GPU type are allocated one after the
other, as 32 starts would; the time of those 32 ``allocate`` calls (database locking,
inventory reads, placement, device binding) is printed. Target: <= 1 s.

PostgreSQL only, on a scratch database of its own (``tests.bench.scratch``). Inventory sync
(reading the hosts' node devices) happens before the clock starts.
"""

import os
import tempfile
import time
from collections import Counter

from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.test.utils import override_settings

from tests.bench.scratch import scratch_database
from tests.bench.worlds import libvirt_catalog

HOSTS, BLOCKS, LEAVES, CLUSTERS, MEMBERS = 64, 4, 4, 32, 8


class Command(BaseCommand):
    help = "Time the libvirt backend's placement of 256 members over 64 test-driver hosts."

    def add_arguments(self, parser):
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")

    def handle(self, *args, **opts):
        if connection.vendor != "postgresql":
            raise CommandError("bench_placement measures PostgreSQL: set DATABASE_URL")
        with (
            scratch_database(keep=opts["keep"], say=self.stdout.write),
            tempfile.TemporaryDirectory() as tmp,
            override_settings(COMPUTE_BACKEND="portal.compute.backends.libvirt.LibvirtBackend"),
        ):
            self.run_bench(tmp)

    def run_bench(self, tmp):
        from clusters.models import VirtualCluster
        from portal.catalog.models import FabricType
        from portal.compute.backends.libvirt import LibvirtBackend
        from portal.compute.backends.libvirt import connection as lv
        from portal.compute.backends.libvirt.inventory import sync_host
        from portal.compute.models.hosts import GpuHost, Placement
        from portal.models import Project
        from tests.libvirt_testhost import write_hosts
        from vms.models import VirtualMachine

        zone, itype = libvirt_catalog(2, 48, 512)
        ib = FabricType.INFINIBAND
        uris = write_hosts(tmp, HOSTS)
        per_leaf = HOSTS // (BLOCKS * LEAVES)
        for i, uri in enumerate(uris):
            host = GpuHost.objects.create(
                name=f"gpu-host-{i:02d}", zone=zone, uri=uri, fabric=ib,
                block=f"b{i // (per_leaf * LEAVES)}", leaf=f"l{i // per_leaf}",
            )  # fmt: skip
            sync_host(host)
        project = Project.objects.create(slug="bench", name="bench")
        clusters = []
        for c in range(CLUSTERS):
            cluster = VirtualCluster.objects.create(
                project=project, name=f"c{c}", zone=zone, instance_type=itype, fabric_type=ib,
                status="PROVISIONING",
            )  # fmt: skip
            VirtualMachine.objects.bulk_create(
                VirtualMachine(
                    project=project,
                    name=f"c{c}-m{m}",
                    zone=zone,
                    instance_type=itype,
                    cluster=cluster,
                    node_rank=m,
                )  # fmt: skip
                for m in range(MEMBERS)
            )
            clusters.append(cluster)
        backend = LibvirtBackend()
        started, cpu = time.perf_counter(), time.process_time()
        for cluster in clusters:
            backend.allocate(cluster, MEMBERS)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        placed = Placement.objects.filter(held=True).select_related("host")
        leaves = Counter()
        for p in placed:
            leaves[(p.cluster_id, p.host.leaf)] += 1
        one_leaf = sum(1 for c in clusters if sum(1 for k in leaves if k[0] == c.pk) == 1)
        for uri in uris:
            lv.forget(uri)
        self.stdout.write(
            f"placed {placed.count()} members of {CLUSTERS} clusters over {HOSTS} hosts "
            f"in {seconds:.3f} s (target <= 1 s; this process's CPU {cpu:.3f} s, load average "
            f"{os.getloadavg()[0]:.1f}); clusters on one leaf: {one_leaf}/{CLUSTERS}"
        )
