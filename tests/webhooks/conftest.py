"""A webhook of demo at the real receiver (``receiver``, tests/conftest.py)."""

import pytest

from portal.webhooks import services


@pytest.fixture
def hook(world, receiver):
    """A webhook of demo at the receiver, for every event type."""
    return services.create_webhook(
        actor=world.admin, project=world.demo, name="alerts", url=receiver.url
    )
