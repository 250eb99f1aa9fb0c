"""One command for a fresh machine: migrate, seed the demo, then run web + worker + beat.

Everything runs on the embedded default (SQLite file, filesystem Celery broker), so no
external service is needed. The worker and beat are supervised (``portal.supervisor``): one
that exits, or a worker that stops consuming, is restarted with a log line. Ctrl-C stops all
three.
"""

import os
import signal
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from portal import heartbeat
from portal.supervisor import Child, Supervisor


def stack(env: dict[str, str]) -> Supervisor:
    """The supervised worker and beat of the demo."""
    celery = [sys.executable, "-m", "celery", "-A", "portal"]
    return Supervisor(
        [
            Child(
                "worker",
                [*celery, "worker", "--loglevel", "WARNING", "--concurrency", "2"],
                watch_heartbeat=True,
            ),
            Child(
                "beat",
                [
                    *celery,
                    "beat",
                    "--loglevel",
                    "WARNING",
                    "--schedule",
                    str(settings.VAR_DIR / "celerybeat-schedule"),
                ],
            ),
        ],
        env=env,
        heartbeat_age=heartbeat.age,
        heartbeat_max_age=settings.WORKER_HEARTBEAT_MAX_AGE_SECONDS,
    )


class Command(BaseCommand):
    help = "Run the portal with demo data: web server, Celery worker and beat."

    def add_arguments(self, parser):
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument(
            "--backend", choices=("simulator", "libvirt"), default="simulator",
            help="libvirt: real TCG guests on this machine (.ci/realvm-demo sets it up)")

    def handle(self, *args, addrport, backend, **options):
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings"}
        if backend == "libvirt":
            from clusters.backends.libvirt import demo

            env.update(demo.configure(addrport))
        call_command("migrate", interactive=False, verbosity=0)
        call_command("seed_demo")
        if backend == "libvirt":
            demo.prepare(self.stdout)
        supervisor = stack(env).start()
        self.stdout.write(
            self.style.SUCCESS(f"Portal at http://{addrport}/ — worker and beat are running.")
        )
        # A SIGTERM to this process should stop the worker and beat too.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            supervisor.stop()
