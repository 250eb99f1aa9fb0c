"""Idempotent, deterministic demo data: catalog, projects, users, VMs (README: Demo data)."""

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from portal.catalog.models import FabricOffering, FabricType, InstanceType, Zone
from portal.compute.models import SimulatorCapacity
from portal.models import Project, Role, RoleBinding
from vms import progress as vm_progress
from vms import services as vm_services
from vms.models import BillingType, VirtualMachine

DEFAULT_PASSWORD = "vc-demo-2026"  # noqa: S105 - the demo's documented password
IB, ROCE = FabricType.INFINIBAND, FabricType.ROCE_V2

ZONES = {"kr-central-1a": "Korea Central 1a", "kr-central-1b": "Korea Central 1b"}
INSTANCE_TYPES = {
    "gpu.h100x8": dict(
        gpu_model="NVIDIA H100 SXM", gpu_count=8, gpu_memory_gib=80, vcpu=192, memory_gib=2048
    ),
    "gpu.l40sx4": dict(
        gpu_model="NVIDIA L40S", gpu_count=4, gpu_memory_gib=48, vcpu=64, memory_gib=512
    ),
}
# (zone, type, fabric): simulated capacity in nodes. L40S/RoCE in 1a is nearly full, so a
# start there shows the capacity error.
OFFERINGS = {
    ("kr-central-1a", "gpu.h100x8", IB): 32,
    ("kr-central-1a", "gpu.h100x8", ROCE): 32,
    ("kr-central-1b", "gpu.h100x8", IB): 16,
    ("kr-central-1b", "gpu.h100x8", ROCE): 16,
    ("kr-central-1a", "gpu.l40sx4", ROCE): 1,
    ("kr-central-1b", "gpu.l40sx4", ROCE): 8,
}
USERS = {
    "admin": ("demo", "admin"),
    "operator": ("demo", "operator"),
    "viewer": ("demo", "viewer"),
    "other": ("other", "admin"),
    "staff": ("demo", "admin"),  # project staff: the Django admin for project demo only
}
STAFF = {"staff"}
# name: (zone, type, billing, DR, start it). gpu-node-01..04 are the cluster the README walks
# through; gpu-node-03 is the simulator's straggler (metrics.simulate.STRAGGLER), which the
# 메트릭 tab names as the slowest member once the cluster runs.
DEMO_VMS = {
    "gpu-node-01": ("kr-central-1a", "gpu.h100x8", BillingType.ON_DEMAND, False, False),
    "gpu-node-02": ("kr-central-1a", "gpu.h100x8", BillingType.ON_DEMAND, False, False),
    "gpu-node-03": ("kr-central-1a", "gpu.h100x8", BillingType.ON_DEMAND, False, False),
    "gpu-node-04": ("kr-central-1a", "gpu.h100x8", BillingType.ON_DEMAND, False, False),
    "gpu-reserved-01": ("kr-central-1a", "gpu.h100x8", BillingType.RESERVED, False, False),
    "gpu-spot-01": ("kr-central-1a", "gpu.h100x8", BillingType.SPOT, False, False),
    "gpu-dr-01": ("kr-central-1a", "gpu.h100x8", BillingType.ON_DEMAND, True, False),
    "gpu-running-01": ("kr-central-1a", "gpu.h100x8", BillingType.ON_DEMAND, False, True),
    "l40s-node-01": ("kr-central-1a", "gpu.l40sx4", BillingType.ON_DEMAND, False, False),
    "gpu-b-node-01": ("kr-central-1b", "gpu.h100x8", BillingType.ON_DEMAND, False, False),
}
OTHER_VMS = {
    "other-node-01": ("kr-central-1a", "gpu.h100x8", BillingType.ON_DEMAND, False, False),
}


class Command(BaseCommand):
    help = "Create (or bring back) the demo catalog, projects, users and VMs."

    def handle(self, *args, **options):
        password = os.environ.get("DEMO_PASSWORD", DEFAULT_PASSWORD)
        with transaction.atomic():
            self.seed_catalog()
            projects = self.seed_projects(password)
        for project, vms in ((projects["demo"], DEMO_VMS), (projects["other"], OTHER_VMS)):
            self.seed_vms(project, vms)
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo data ready. Users admin / operator / viewer (project demo), other "
                f"(project other), staff (the Django admin for project demo), root (platform "
                f"admin); password: {password}"
            )
        )

    def seed_catalog(self):
        zones = {
            code: Zone.objects.update_or_create(code=code, defaults={"name": name})[0]
            for code, name in ZONES.items()
        }
        types = {
            code: InstanceType.objects.update_or_create(code=code, defaults=spec)[0]
            for code, spec in INSTANCE_TYPES.items()
        }
        for (zone, itype, fabric), nodes in OFFERINGS.items():
            FabricOffering.objects.get_or_create(
                zone=zones[zone], instance_type=types[itype], fabric=fabric
            )
            SimulatorCapacity.objects.update_or_create(
                zone=zones[zone],
                instance_type=types[itype],
                fabric=fabric,
                defaults={"total_nodes": nodes},
            )

    def seed_projects(self, password):
        User = get_user_model()
        projects = {
            slug: Project.objects.update_or_create(slug=slug, defaults={"name": name})[0]
            for slug, name in (("demo", "demo"), ("other", "other"))
        }
        for username, (project, role) in USERS.items():
            user, _created = User.objects.update_or_create(
                username=username,
                defaults={"is_staff": username in STAFF, "is_superuser": False},
            )
            user.set_password(password)
            user.save()
            RoleBinding.objects.update_or_create(
                user=user,
                project=projects[project],
                defaults={"role": Role.objects.get(name=role)},
            )
        root, _created = User.objects.update_or_create(
            username="root", defaults={"is_staff": True, "is_superuser": True}
        )
        root.set_password(password)
        root.save()
        return projects

    def seed_vms(self, project, specs):
        for name, (zone, itype, billing, dr, running) in specs.items():
            if VirtualMachine.objects.alive().filter(project=project, name=name).exists():
                continue
            vm = vm_services.create_vm(
                actor=None,
                project=project,
                name=name,
                zone_id=Zone.objects.get(code=zone).pk,
                instance_type_id=InstanceType.objects.get(code=itype).pk,
                billing_type=billing,
                disaster_recovery=dr,
            )
            if running:
                vm_services.start_vm(vm.pk, actor=None)
                vm_progress.advance_vm(vm.pk)
