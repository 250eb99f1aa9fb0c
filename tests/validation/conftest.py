"""A running cluster of the demo's four nodes, for the 검증 and 교체 pages' tests."""

import pytest

from clusters import services
from clusters.models import ClusterStatus
from vms.models import VmStatus

NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]


@pytest.fixture
def running(world):
    world.capacity(16)
    cluster = world.cluster("train")
    for name in NODES:
        services.attach_vm(world.vm(name).pk, cluster.pk, actor=world.admin)
    cluster.members.update(status=VmStatus.RUNNING)
    type(cluster).objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)
    cluster.refresh_from_db()
    return cluster
