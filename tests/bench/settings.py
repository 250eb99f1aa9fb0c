"""The benchmark commands' settings: the portal's own (``PORTAL_MODE`` as set, tasks on the
worker, the simulator at its real pace), plus this app, which ``portal.settings`` never
installs. ``DJANGO_SETTINGS_MODULE=tests.bench.settings python manage.py bench_pages``."""

from portal.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.bench"]  # noqa: F405
