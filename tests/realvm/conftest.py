"""The real tier (marker ``realvm``): TCG guests from the built image on this machine's
libvirtd. Needs root, libvirt and QEMU, mmdebstrap (``.ci/run`` installs them and starts the
daemons); the image is built once and cached under ``var/guest``."""

import pytest

from .guests import destroy_everything, far_ids, image_or_skip, use_libvirt


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/realvm/" in str(item.fspath):
            item.add_marker(pytest.mark.realvm)


@pytest.fixture(scope="session")
def built_image():
    return image_or_skip()


@pytest.fixture
def real(built_image, world, settings):
    """The libvirt backend on this machine, guests reporting to a live server on the
    management network; ids far from other test databases', and everything of theirs
    destroyed after."""
    with use_libvirt(settings):
        base = far_ids()
        yield built_image
        destroy_everything(range(base, base + 1000), range(base, base + 1000))
