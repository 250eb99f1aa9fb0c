"""The libvirt compute backend
(``COMPUTE_BACKEND=portal.compute.backends.libvirt.LibvirtBackend``)."""

from portal.compute.backends.libvirt.backend import LibvirtBackend

__all__ = ["LibvirtBackend"]
