"""``manage.py watch_domains``: listen to libvirt's lifecycle events of every GPU host, so a
guest that stops on its own (shut down from inside, crashed, destroyed outside the portal)
shows 중지됨, with the reason, within seconds instead of at the reconciler's next pass.

One process for the whole portal (``rundemo --backend libvirt`` supervises it; in production
a systemd unit beside the worker and beat). Hosts added later, and hosts whose connection
closed, are listened to at the next rescan. The reconciler stays the backstop: what stops
while this process is down is found by its next pass.
"""

import time

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from portal.compute.backends.libvirt.events import Stop, Watcher
from portal.compute.models.hosts import GpuHost
from vms import progress


class Command(BaseCommand):
    help = (
        "Listen to libvirt's lifecycle events: a guest that stops on its own shows 중지됨 at once."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--rescan-seconds",
            type=float,
            default=30.0,
            help="how often new hosts and closed connections are looked for",
        )

    def handle(self, *args, rescan_seconds, **options):
        watcher = Watcher()
        try:
            while True:
                close_old_connections()  # a long-lived process: a connection may have died
                watcher.watch(GpuHost.objects.order_by("pk"))
                deadline = time.monotonic() + rescan_seconds
                while (left := deadline - time.monotonic()) > 0:
                    watcher.drain(self.stopped, timeout=left)
        finally:
            watcher.close()

    def stopped(self, stop: Stop) -> None:
        close_old_connections()
        if progress.domain_stopped(stop.vm_id, stop.reason, stop.seen_at):
            self.stdout.write(f"vm {stop.vm_id}: {stop.reason}")
