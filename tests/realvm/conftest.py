"""The real tier (marker ``realvm``): TCG guests from the built image on this machine's
libvirtd. Needs root, libvirt and QEMU, mmdebstrap (``.ci/run`` installs them and starts the
daemons); the image is built once and cached under ``var/guest``."""

import pytest

from .guests import destroy_everything, far_ids, image_or_skip, use_libvirt


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Mark this folder's tests ``realvm``, and put every ``realvm`` test (the browser's walk
    on real guests too) in one ``xdist_group``: under ``pytest -n --dist loadgroup`` they run
    one after another on one worker. They share one libvirtd, its management network and
    pools, and the guest image under ``var/guest``.

    ``tryfirst``: xdist reads the groups in its own ``pytest_collection_modifyitems``, and
    which of two unordered hooks runs first depends on whether this conftest was loaded
    before the worker started (``pytest tests/realvm``) or during collection."""
    for item in items:
        if "tests/realvm/" in str(item.fspath):
            item.add_marker(pytest.mark.realvm)
        if item.get_closest_marker("realvm") is not None:
            item.add_marker(pytest.mark.xdist_group("realvm"))


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
