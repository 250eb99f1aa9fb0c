"""One command for a fresh machine: migrate, seed the demo, then run web + worker + beat.

Everything runs on the embedded default (SQLite file, filesystem Celery broker), so no
external service is needed. Ctrl-C stops all three.
"""

import os
import signal
import subprocess
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the portal with demo data: web server, Celery worker and beat."

    def add_arguments(self, parser):
        parser.add_argument("--addrport", default="127.0.0.1:8000")

    def handle(self, *args, addrport, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("seed_demo")
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings"}
        celery = [sys.executable, "-m", "celery", "-A", "portal"]
        children = [
            subprocess.Popen(
                [*celery, "worker", "--loglevel", "WARNING", "--concurrency", "2"], env=env
            ),
            subprocess.Popen(
                [
                    *celery,
                    "beat",
                    "--loglevel",
                    "WARNING",
                    "--schedule",
                    str(settings.VAR_DIR / "celerybeat-schedule"),
                ],
                env=env,
            ),
        ]
        self.stdout.write(
            self.style.SUCCESS(f"Portal at http://{addrport}/ — worker and beat are running.")
        )
        # A SIGTERM to this process should stop the worker and beat too.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            for child in children:
                child.send_signal(signal.SIGTERM)
            for child in children:
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
