"""The compute backend (docs/architecture.md#compute-backends): one interface, chosen by
``settings.COMPUTE_BACKEND``."""

from functools import cache
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from portal.compute.backends.base import ComputeBackend


@cache
def _backend_class(path):
    return import_string(path)


def get_backend() -> "ComputeBackend":
    backend: ComputeBackend = _backend_class(settings.COMPUTE_BACKEND)()
    return backend
