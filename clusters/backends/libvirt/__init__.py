"""The libvirt compute backend (``COMPUTE_BACKEND=clusters.backends.libvirt.LibvirtBackend``)."""

from clusters.backends.libvirt.backend import LibvirtBackend

__all__ = ["LibvirtBackend"]
