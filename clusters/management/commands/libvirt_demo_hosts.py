"""``manage.py libvirt_demo_hosts`` (run by ``rundemo --backend libvirt`` after seeding the
demo): builds the guest image (cached), registers this machine's libvirtd as GPU hosts with
declared GPU slots matching the demo's capacity — 4 H100 nodes per fabric in kr-central-1a,
1 L40S RoCE node there (a start of 2 shows the capacity error), 1 H100 node in kr-central-1b
— puts the image's base volume in the hosts' storage pool and makes the management network;
then the demo's running VM, whose start at seeding found no host yet, is started for real.
Idempotent."""

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from portal.catalog.models import FabricType, InstanceType, Zone
from portal.compute.backends.libvirt import management
from portal.compute.backends.libvirt.connection import connect
from portal.compute.backends.libvirt.guest import image as guest_image
from portal.compute.backends.libvirt.guest import install as guest_install
from portal.compute.backends.libvirt.inventory import sync_host
from portal.compute.models.hosts import GpuHost
from portal.foundation.errors import BackendError
from portal.management.commands.seed_demo import DEMO_VMS
from vms import progress as vm_progress
from vms import services as vm_services
from vms.models import VirtualMachine, VmStatus

URI = "qemu:///system"
# name: (zone, fabric, instance type whose GPU model the slots are, GPUs, VFs)
HOSTS = {
    "local-ib": ("kr-central-1a", FabricType.INFINIBAND, "gpu.h100x8", 32, 4),
    "local-roce": ("kr-central-1a", FabricType.ROCE_V2, "gpu.h100x8", 32, 4),
    "local-l40s": ("kr-central-1a", FabricType.ROCE_V2, "gpu.l40sx4", 4, 1),
    "local-b": ("kr-central-1b", FabricType.INFINIBAND, "gpu.h100x8", 8, 1),
}


class Command(BaseCommand):
    help = "Register this machine as the libvirt demo's GPU hosts, with the guest image."

    def handle(self, *args, **options):
        try:
            prepare(self.stdout)
        except guest_image.ImageError as error:
            raise CommandError(str(error)) from error


def prepare(out) -> list[GpuHost]:
    """The image (built once), the hosts (idempotent) and the base volume in their pool."""
    image, built = guest_image.build(out=out)
    out.write(f"guest image {'built' if built else 'up to date'}: {image.directory.name}\n")
    hosts = []
    for name, (zone, fabric, itype, gpus, vfs) in HOSTS.items():
        host, _created = GpuHost.objects.update_or_create(
            name=name,
            defaults={
                "zone": Zone.objects.get(code=zone),
                "uri": URI,
                "domain_type": "qemu",
                "fabric": fabric,
                "block": "b1",
                "leaf": "l1",
                "rack": "r1",
                "emulated_gpus": gpus,
                "emulated_vfs": vfs,
                "emulated_gpu_model": InstanceType.objects.get(code=itype).gpu_model,
            },
        )
        sync_host(host)
        hosts.append(host)
    volume = guest_install.install(hosts[0], image)  # one pool: the hosts share this libvirtd
    try:
        management.ensure(connect(hosts[0]))  # where the guests reach the portal
    except BackendError:
        raise CommandError(
            _(
                "관리 네트워크 %(name)s(%(block)s)를 시작하지 못했습니다. 이 호스트의 다른 "
                "네트워크가 그 주소를 쓰고 있습니다. LIBVIRT_PORTAL_URL에 다른 주소를 "
                "지정하세요(예: http://10.0.4.2:8000)."
            )
            % {"name": management.network_name(), "block": management.network_block()}
        ) from None
    out.write(f"GPU hosts {', '.join(HOSTS)} on {URI}, base volume {volume}\n")
    running = [name for name, spec in DEMO_VMS.items() if spec[-1]]
    for vm in VirtualMachine.objects.filter(
        name__in=running, project__slug="demo", status=VmStatus.STOPPED
    ):
        vm_services.start_vm(vm.pk, actor=None)
        vm_progress.advance_vm(vm.pk)
    return hosts
