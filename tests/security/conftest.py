"""Objects every security test points at: one of each state an action needs, in ``demo``,
and their twins in ``other`` (a project the demo users hold no role in)."""

from dataclasses import dataclass

import pytest
from django.core.cache import cache

from clusters.models import ClusterStatus
from portal.models import SshKey
from portal.webhooks.models import Webhook
from tests.ssh_keys_data import ED25519, ED25519_FINGERPRINT
from vms.models import VmStatus


@dataclass
class Scene:
    world: object
    cluster: object  # 미할당, two stopped members: start and delete succeed
    running: object  # 실행중, two stopped members: stop succeeds
    vm: object  # a stopped standalone VM: start, delete, attach to ``cluster`` succeed
    running_vm: object  # a running standalone VM: stop succeeds
    other_cluster: object
    other_vm: object
    key: object  # an SSH key of demo
    other_key: object
    hook: object  # a webhook of demo
    other_hook: object


@pytest.fixture
def scene(world):
    cluster = world.cluster("alpha-demo-cluster")
    world.members(cluster, 2)
    running = world.cluster("beta-demo-cluster", status=ClusterStatus.RUNNING)
    world.members(running, 2)
    other_cluster = world.cluster("omega-other-cluster", project=world.other)
    return Scene(
        world=world,
        cluster=cluster,
        running=running,
        vm=world.vm("gamma-demo-vm"),
        running_vm=world.vm("delta-demo-vm", status=VmStatus.RUNNING),
        other_cluster=other_cluster,
        other_vm=world.vm("omega-other-vm", project=world.other),
        key=SshKey.objects.create(
            project=world.demo, name="kappa-demo-key", public_key=ED25519, key_type="ssh-ed25519",
            bits=256, fingerprint=ED25519_FINGERPRINT,
        ),
        other_key=SshKey.objects.create(
            project=world.other, name="omega-other-key", public_key=ED25519,
            key_type="ssh-ed25519", bits=256, fingerprint=ED25519_FINGERPRINT,
        ),
        hook=Webhook.objects.create(
            project=world.demo, name="lambda-demo-hook", url="https://hooks.example.com/d",
            events=["cluster.status_changed"], secret="whsec_demo",
        ),
        other_hook=Webhook.objects.create(
            project=world.other, name="omega-other-hook", url="https://hooks.example.com/o",
            events=["cluster.status_changed"], secret="whsec_other",
        ),
    )  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_throttle_counters():
    """Login throttling counts in the cache: every test starts with clean counters."""
    cache.clear()
    yield
    cache.clear()
