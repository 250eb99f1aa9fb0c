"""Helpers of the browser tests: screenshots on request, the language switch, the README's
cluster running and its members' quarter of an hour of samples.

``SCREENSHOTS=/some/dir`` makes ``shoot`` save the page there, named by page, width and
language (``members-390-ko.png``); without it, ``shoot`` does nothing."""

import os
from datetime import timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from clusters import services
from clusters.models import ClusterStatus, VirtualCluster
from metrics import simulate, tasks
from portal.catalog.models import FabricType, InstanceType, Zone
from portal.models import Project
from vms import services as vm_services
from vms.models import VirtualMachine

SHOTS = os.environ.get("SCREENSHOTS")


def shoot(page, name):
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        width = page.viewport_size["width"]
        lang = page.locator("html").get_attribute("lang")
        page.screenshot(path=f"{SHOTS}/{name}-{width}-{lang}.png", full_page=True)


def switch_language(page, to):
    """The top bar's language button, to ``"en"`` or ``"ko"``; the page reloads in it."""
    page.get_by_role("button", name="English" if to == "en" else "한국어").click()
    expect(page.locator("html")).to_have_attribute("lang", to)


def demo_placed(name, actor):
    """``create_cluster``'s arguments for ``name`` in demo: kr-central-1a, gpu.h100x8,
    InfiniBand (where the seed's gpu-node-01…04 are)."""
    return {
        "actor": actor,
        "project": Project.objects.get(slug="demo"),
        "name": name,
        "zone_id": Zone.objects.get(code="kr-central-1a").pk,
        "instance_type_id": InstanceType.objects.get(code="gpu.h100x8").pk,
        "fabric_type": FabricType.INFINIBAND,
    }


def demo_cluster(name, members=(), *, start=False) -> VirtualCluster:
    """A demo cluster made by the services with eager tasks, ``members`` attached in order;
    with ``start``, it and its members 실행중."""
    admin = get_user_model().objects.get(username="admin")
    cluster = services.create_cluster(**demo_placed(name, admin))
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


def running_a_quarter_hour(names):
    """As if the VMs ``names`` had been running for 15 minutes: the beat's ten-second
    samples of the simulator for the last ten minutes, rolled up."""
    now = timezone.now()
    VirtualMachine.objects.filter(name__in=names).update(
        status_changed_at=now - timedelta(minutes=15)
    )
    for i in range(60, 0, -1):
        simulate.emit_samples(now - timedelta(seconds=10 * i))
    tasks.rollup()
