"""Sending tasks to the broker without letting its failure undo a committed change."""

import logging

from kombu.exceptions import OperationalError as KombuOperationalError

log = logging.getLogger(__name__)


def publish(task, *args) -> bool:
    """Send ``task``; on a broker failure log it and return False (the reconciler repairs)."""
    try:
        task.delay(*args)
    except KombuOperationalError:
        log.warning(
            "broker unavailable: %s%r left to the reconciler", task.name, args, exc_info=True
        )
        return False
    return True
