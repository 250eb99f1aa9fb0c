"""Build the small Debian guest the libvirt backend boots (``portal.compute.backends.libvirt``):
``mmdebstrap`` of bookworm with Python and the metrics agent installed by pip from a wheel of
``metrics/vm_agent``, Debian's kernel as an uncompressed ``vmlinux`` and a tiny initramfs,
cached under ``var/guest/`` and rebuilt only when an input changes. Needs root, mmdebstrap,
qemu-utils and apt (``.ci/realvm-demo`` installs what is missing)."""

import time

from django.core.management.base import BaseCommand, CommandError

from portal.compute.backends.libvirt.guest import image as guest_image


class Command(BaseCommand):
    help = __doc__.split("\n")[0]

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="rebuild even if cached")

    def handle(self, *args, force=False, **options):
        started = time.monotonic()
        try:
            image, built = guest_image.build(out=self.stdout, force=force)
        except guest_image.ImageError as error:
            raise CommandError(str(error)) from error
        state = "built" if built else "up to date"
        self.stdout.write(
            f"guest image {state} in {time.monotonic() - started:.1f} s: {image.directory}"
        )
