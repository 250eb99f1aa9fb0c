"""Helpers of the browser tests: screenshots on request, the README's cluster running.

``SCREENSHOTS=/some/dir`` makes ``shoot`` save the page there, named by page, width and
language (``members-390-ko.png``); without it, ``shoot`` does nothing."""

import os
from pathlib import Path

from django.contrib.auth import get_user_model

from clusters import services
from clusters.models import ClusterStatus, VirtualCluster
from portal.models import Project
from vms import services as vm_services
from vms.models import FabricType, InstanceType, VirtualMachine, Zone

SHOTS = os.environ.get("SCREENSHOTS")


def shoot(page, name):
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        width = page.viewport_size["width"]
        lang = page.locator("html").get_attribute("lang")
        page.screenshot(path=f"{SHOTS}/{name}-{width}-{lang}.png", full_page=True)


def demo_cluster(name, members=(), *, start=False) -> VirtualCluster:
    """A demo cluster (kr-central-1a, gpu.h100x8, InfiniBand) made by the services with eager
    tasks, ``members`` attached in order; with ``start``, it and its members 실행중."""
    cluster = services.create_cluster(
        actor=get_user_model().objects.get(username="admin"),
        project=Project.objects.get(slug="demo"),
        name=name,
        zone_id=Zone.objects.get(code="kr-central-1a").pk,
        instance_type_id=InstanceType.objects.get(code="gpu.h100x8").pk,
        fabric_type=FabricType.INFINIBAND,
    )
    vms = [VirtualMachine.objects.get(name=vm) for vm in members]
    for vm in vms:
        services.attach_vm(vm.pk, cluster.pk, actor=None)
    if start:
        services.start_cluster(cluster.pk, actor=None)
        for vm in vms:
            vm_services.start_vm(vm.pk, actor=None)
        cluster.refresh_from_db()
        assert cluster.status == ClusterStatus.RUNNING
    return cluster
