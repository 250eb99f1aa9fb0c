"""The libvirt fast tier's fixtures, for the tests of this folder that ask for them."""

from tests.clusters.libvirt_world import commits, hosts  # noqa: F401
