"""The compute backend (SPEC §8): one interface, chosen by ``settings.COMPUTE_BACKEND``."""

from functools import cache

from django.conf import settings
from django.utils.module_loading import import_string


@cache
def _backend_class(path):
    return import_string(path)


def get_backend():
    return _backend_class(settings.COMPUTE_BACKEND)()
