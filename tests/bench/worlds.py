"""The data each benchmark fills its scratch database with (``tests.bench.scratch``)."""

import random
import secrets

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from clusters.models import ClusterStatus, VirtualCluster
from metrics import services
from metrics.ingest.batch import TOKEN_PREFIX, hash_token
from metrics.models import MetricsToken
from portal.catalog import models as catalog_models
from portal.compute.models import SimulatorAllocation, SimulatorCapacity
from portal.iam.permissions import BUILTIN_ROLES
from portal.models import AuditEvent, Project, Role, RoleBinding
from vms import models as vm_models

LOAD_PROJECTS = 5
LOAD_CLUSTERS_PER_PROJECT = 120


def bench_catalog():
    """One zone, an 8×H100 type offering both fabrics with room for anything, and the built-in
    roles (created by a migration, but a scratch database built for tests has them flushed).
    Returns (zone, instance type, {fabric: SimulatorCapacity})."""
    zone = catalog_models.Zone.objects.create(code="kr-central-1a", name="Korea Central 1a")
    h100 = catalog_models.InstanceType.objects.create(
        code="gpu.h100x8", gpu_model="NVIDIA H100 SXM", gpu_count=8, vcpu=192, memory_gib=2048
    )
    capacity = {}
    for fabric in catalog_models.FabricType.values:
        catalog_models.FabricOffering.objects.create(zone=zone, instance_type=h100, fabric=fabric)
        capacity[fabric] = SimulatorCapacity.objects.create(
            zone=zone, instance_type=h100, fabric=fabric, total_nodes=100_000
        )
    for name, perms in BUILTIN_ROLES.items():
        Role.objects.get_or_create(name=name, defaults={"permissions": sorted(perms)})
    return zone, h100, capacity


def libvirt_catalog(gpu_count, vcpu, memory_gib):
    """The libvirt benches' catalog: zone ``bench-1a`` and an H100 type of ``gpu_count`` GPUs
    offered over InfiniBand. Returns (zone, instance type)."""
    zone = catalog_models.Zone.objects.create(code="bench-1a", name="bench")
    itype = catalog_models.InstanceType.objects.create(
        code=f"gpu.h100x{gpu_count}",
        gpu_model="H100",
        gpu_count=gpu_count,
        vcpu=vcpu,
        memory_gib=memory_gib,
    )
    catalog_models.FabricOffering.objects.create(
        zone=zone, instance_type=itype, fabric=catalog_models.FabricType.INFINIBAND
    )
    return zone, itype


def clusters_with_members(
    project, zone, itype, count, members, *, name, status, member, **cluster_fields
):
    """``count`` clusters of ``project`` named ``<name>-<i>``, ``status(i)`` each, with
    ``members(i)`` member VMs; ``member(i, j)`` gives the fields of member ``j`` of cluster
    ``i`` (its address at least; stopped and on demand unless it says otherwise)."""
    clusters = VirtualCluster.objects.bulk_create(
        VirtualCluster(
            project=project,
            name=f"{name}-{i:05d}",
            zone=zone,
            instance_type=itype,
            fabric_type=catalog_models.FabricType.INFINIBAND,
            status=status(i),
            **cluster_fields,
        )
        for i in range(count)
    )
    vm_models.VirtualMachine.objects.bulk_create(
        vm_models.VirtualMachine(
            project=project,
            name=f"{c.name}-m{j}",
            zone=zone,
            instance_type=itype,
            cluster=c,
            **{
                "billing_type": vm_models.BillingType.ON_DEMAND,
                "status": vm_models.VmStatus.STOPPED,
                **member(i, j),
            },
        )
        for i, c in enumerate(clusters)
        for j in range(members(i))
    )
    return clusters


def running_cluster(project, zone, itype, user, capacity, name, members):
    """A RUNNING cluster whose ``members`` VMs run on the simulator's capacity."""
    (cluster,) = clusters_with_members(
        project, zone, itype, 1, lambda _i: members, name=name,
        status=lambda _i: ClusterStatus.RUNNING, created_by=user,
        member=lambda _i, j: {
            "billing_type": vm_models.BillingType.RESERVED,
            "status": vm_models.VmStatus.RUNNING,
            "private_ip": f"10.1.{j // 250}.{j % 250 + 2}",
            "fabric_guid": f"0x248a0703{j:08x}",
            "fabric_lid": j + 1,
        },
    )  # fmt: skip
    SimulatorAllocation.objects.create(
        cluster=cluster, capacity=capacity, nodes=members, configured=True
    )
    return cluster


def pages_world():
    """bench_pages: projects of 10, 50 and 10,000 clusters (two members each), a running
    cluster of 8 with 200 audit events, one of 256. Returns (user, projects, detail, wide)."""
    zone, h100, capacities = bench_catalog()
    capacity = capacities[catalog_models.FabricType.INFINIBAND]
    user = get_user_model().objects.create_user("bench", password="bench-pass-1234")
    admin = Role.objects.get(name="admin")
    projects = {}
    for slug in ("small", "fifty", "large", "detail"):
        projects[slug] = Project.objects.create(slug=slug, name=slug)
        RoleBinding.objects.create(user=user, project=projects[slug], role=admin)
    statuses = [ClusterStatus.RUNNING, ClusterStatus.UNALLOCATED, ClusterStatus.TERMINATED]
    for slug, count in (("small", 10), ("fifty", 50), ("large", 10_000)):
        clusters_with_members(
            projects[slug],
            zone,
            h100,
            count,
            lambda _i: 2,
            name=f"{slug}-cluster",
            status=lambda i: statuses[i % 3],
            member=lambda i, j: {"private_ip": f"10.{j}.{i // 250}.{i % 250 + 2}"},
            created_by=user,
        )
    detail = running_cluster(projects["detail"], zone, h100, user, capacity, "detail", 8)
    wide = running_cluster(projects["detail"], zone, h100, user, capacity, "wide", 256)
    AuditEvent.objects.bulk_create(
        AuditEvent(
            project=projects["detail"],
            actor=user,
            action="vm.start",
            target_type="vm",
            target_id=i,
            target_name=f"node-{i}",
            cluster_id=detail.pk,
            outcome=AuditEvent.Outcome.SUCCEEDED,
        )
        for i in range(200)
    )
    return user, projects, detail, wide


def load_world(seed):
    """loadtest: five projects of ten operators, 120 clusters each (two to four members),
    and per user one cluster of their own to start and stop. Returns one dict a user."""
    zone, h100, _capacity = bench_catalog()
    operator = Role.objects.get(name="operator")
    User = get_user_model()
    users = []
    rng = random.Random(seed)
    for p in range(LOAD_PROJECTS):
        project = Project.objects.create(slug=f"load-{p}", name=f"load-{p}")
        clusters = clusters_with_members(
            project,
            zone,
            h100,
            LOAD_CLUSTERS_PER_PROJECT,
            lambda i: 2 + i % 3,
            name=f"p{p}-cluster",
            status=lambda _i: rng.choice([ClusterStatus.UNALLOCATED, ClusterStatus.TERMINATED]),
            member=lambda i, j, p=p: {"private_ip": f"10.{p}.{i // 200}.{(i * 4 + j) % 250 + 2}"},
        )
        for u in range(10):
            user = User(username=f"load-{p}-{u}")
            user.set_unusable_password()
            user.save()
            RoleBinding.objects.create(user=user, project=project, role=operator)
            (own,) = clusters_with_members(
                project,
                zone,
                h100,
                1,
                lambda _i: 2,
                name=f"own-{p}-{u}",
                status=lambda _i: ClusterStatus.UNALLOCATED,
                member=lambda _i, j, p=p, u=u: {
                    "private_ip": f"10.9{p}.{u}.{j + 2}",
                    "billing_type": vm_models.BillingType.RESERVED,
                },
            )
            users.append(
                {
                    "user": user,
                    "project": project,
                    "own": own.pk,
                    "members": list(own.members.values_list("pk", flat=True)),
                    "clusters": [c.pk for c in clusters],
                }
            )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return users


def metrics_world(vm_count):
    """bench_metrics: one RUNNING cluster of ``vm_count`` running members, each with an
    agent token. Returns (cluster, vms, tokens)."""
    zone, h100, _capacity = bench_catalog()
    project = Project.objects.create(slug="bench", name="bench")
    (cluster,) = clusters_with_members(
        project, zone, h100, 1, lambda _i: vm_count, name="bench",
        status=lambda _i: ClusterStatus.RUNNING,
        member=lambda _i, j: {
            "status": vm_models.VmStatus.RUNNING, "private_ip": f"10.2.{j // 250}.{j % 250}"
        },
    )  # fmt: skip
    vms = list(cluster.members.order_by("pk"))
    tokens = [services.rotate_token(vm.pk, actor=None)[1] for vm in vms]
    return cluster, vms, tokens


def fleet_pages_world(user, project_clusters, total_clusters, wides, api_vms):
    """bench_fleet_pages: a project of ``project_clusters`` clusters (two members each)
    among ``total_clusters`` in the database (the rest, one member each, in a project of
    their own), a running cluster per size of ``wides`` in a project ``detail``, and a
    project ``api`` of ``api_vms`` standalone VMs. Returns ({slug: project}, {size: cluster},
    capacity)."""
    zone, h100, capacities = bench_catalog()
    capacity = capacities[catalog_models.FabricType.INFINIBAND]
    admin = Role.objects.get(name="admin")
    projects = {}
    for slug in ("fleet", "others", "detail", "api"):
        projects[slug] = Project.objects.create(slug=slug, name=slug)
        RoleBinding.objects.create(user=user, project=projects[slug], role=admin)
    statuses = [ClusterStatus.RUNNING, ClusterStatus.UNALLOCATED, ClusterStatus.TERMINATED]
    for slug, count, members in (
        ("fleet", project_clusters, 2),
        ("others", total_clusters - project_clusters - len(wides), 1),
    ):
        for first in range(0, count, 10_000):  # the ORM's objects a batch at a time
            clusters_with_members(
                projects[slug], zone, h100, min(10_000, count - first),
                lambda _i, members=members: members,
                name=f"{slug}-{first // 10_000:02d}",
                status=lambda i: statuses[i % 3],
                member=lambda i, j: {"private_ip": f"10.{j}.{i // 250}.{i % 250 + 2}"},
                created_by=user,
            )  # fmt: skip
    wide = {
        size: running_cluster(projects["detail"], zone, h100, user, capacity, f"wide{size}", size)
        for size in wides
    }
    vm_models.VirtualMachine.objects.bulk_create(
        (
            vm_models.VirtualMachine(
                project=projects["api"],
                name=f"api-vm-{i:05d}",
                zone=zone,
                instance_type=h100,
                billing_type=vm_models.BillingType.ON_DEMAND,
                status=vm_models.VmStatus.STOPPED,
                private_ip=f"10.8.{i // 250}.{i % 250 + 2}",
            )
            for i in range(api_vms)
        ),
        batch_size=5_000,
    )
    return projects, wide, capacity


def fleet_world(vm_count, per_cluster=16):
    """bench_ingest_fleet: ``vm_count`` running members in RUNNING clusters of
    ``per_cluster``, each with an agent token (written in bulk: issuing 8,000 through the
    service would audit each). Returns (vms, tokens), in the same order."""
    zone, h100, _capacity = bench_catalog()
    project = Project.objects.create(slug="fleet", name="fleet")
    count = -(-vm_count // per_cluster)
    clusters_with_members(
        project, zone, h100, count,
        lambda i: min(per_cluster, vm_count - i * per_cluster), name="fleet",
        status=lambda _i: ClusterStatus.RUNNING,
        member=lambda i, j: {
            "status": vm_models.VmStatus.RUNNING, "private_ip": f"10.{i // 250}.{i % 250}.{j + 2}"
        },
    )  # fmt: skip
    vms = list(vm_models.VirtualMachine.objects.filter(project=project).order_by("pk"))
    tokens = [TOKEN_PREFIX + secrets.token_urlsafe(32) for _vm in vms]
    now = timezone.now()
    MetricsToken.objects.bulk_create(
        MetricsToken(vm=vm, token_hash=hash_token(token), prefix=token[:12], created_at=now)
        for vm, token in zip(vms, tokens, strict=True)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return vms, tokens
