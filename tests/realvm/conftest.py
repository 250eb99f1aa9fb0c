"""The real tier (marker ``realvm``): TCG guests from the built image on this machine's
libvirtd. Needs root, libvirt and QEMU, mmdebstrap (``.ci/run`` installs them and starts the
daemons); the image is built once and cached under ``var/guest``."""

import os
import random

import pytest

from clusters.backends.libvirt import guest_image

from .guests import destroy_everything, ensure_daemons, missing_tools


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/realvm/" in str(item.fspath):
            item.add_marker(pytest.mark.realvm)


@pytest.fixture(scope="session")
def built_image():
    if os.geteuid() != 0 or missing_tools():
        pytest.skip(f"the real tier needs root and {missing_tools()} (bash .ci/run installs them)")
    ensure_daemons()
    image, _built = guest_image.build(out=None)
    return image


@pytest.fixture
def real(built_image, world, live_server, settings):
    """The libvirt backend on this machine, guests reporting to the live server; ids far from
    other test databases' (one libvirtd is shared), and everything of theirs destroyed after."""
    from clusters.models import VirtualCluster
    from vms.models import VirtualMachine

    settings.COMPUTE_BACKEND = "clusters.backends.libvirt.LibvirtBackend"
    settings.LIBVIRT_DOMAIN_TYPE = "qemu"
    settings.LIBVIRT_PORTAL_URL = f"http://10.0.2.2:{live_server.thread.port}"
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "10.0.2.2"]
    settings.GUEST_AGENT_INTERVAL = 5
    base = random.randrange(10**6, 10**9)
    from django.db import connection

    with connection.cursor() as cursor:
        for model in (VirtualMachine, VirtualCluster):
            cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)",
                           [model._meta.db_table, base])
    yield built_image
    destroy_everything(
        range(base, base + 1000), range(base, base + 1000))
