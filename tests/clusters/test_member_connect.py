"""Members know each other, as the console shows it: each member's rank and fabric address on
the 연결된 가상머신 tab, how to connect (``ssh vc@<private IP>`` with its 복사 button and the
host key fingerprints its agent reported) there and on the VM page, and the 정보 tab's
hostfile and torchrun lines filled with this cluster's real values (``--nnodes``, rank 0's
fabric address as ``--master_addr``, slots = GPUs or 1)."""

import re
from html import unescape

import pytest
from django.utils import timezone

from clusters import services
from clusters.models import ClusterStatus
from portal.catalog.models import FabricOffering, FabricType, InstanceType
from vms.models import HostKey, VmStatus
from vms.templatetags.vm_tags import ssh_block

HX = {"HTTP_HX_REQUEST": "true"}
FINGERPRINT = "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s"


def body(response):
    assert response.status_code == 200, response.status_code
    return response.content.decode()


@pytest.fixture
def roce(world, django_capture_on_commit_callbacks):
    """A 실행중 RoCE cluster of three members (a, b, c in rank order) with fabric IPs."""
    world.capacity(8, fabric=FabricType.ROCE_V2)
    cluster = world.cluster("ring", fabric_type=FabricType.ROCE_V2)
    vms = [world.vm(name, private_ip=f"10.0.0.{i + 5}") for i, name in enumerate("abc")]
    for vm in vms:
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    with django_capture_on_commit_callbacks(execute=True):
        services.start_cluster(cluster.pk, actor=world.admin)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING
    return cluster, {m.name: m for m in cluster.members.all()}


def test_the_info_tab_and_hostfile_use_rank_0s_fabric_address_and_the_member_count(login, roce):
    cluster, members = roce
    master = members["a"].fabric_ip
    assert master and master != members["a"].private_ip
    client = login("viewer")
    info = unescape(body(client.get(f"/clusters/{cluster.pk}/")))
    assert f"--nnodes=3 --node_rank=2 --master_addr={master} --master_port=29500" in info
    hostfile = body(client.get(f"/clusters/{cluster.pk}/hostfile/"))
    assert hostfile.splitlines() == [
        f"{members[name].fabric_ip} slots=8  # {name}" for name in "abc"
    ]


def test_an_instance_type_without_gpus_has_one_slot_and_one_process(world, login):
    cpu = InstanceType.objects.create(
        code="cpu.c32", gpu_model="", gpu_count=0, vcpu=32, memory_gib=128
    )
    FabricOffering.objects.create(zone=world.zone_a, instance_type=cpu, fabric=FabricType.ROCE_V2)
    cluster = world.cluster(
        "cpus", instance_type=cpu, fabric_type=FabricType.ROCE_V2, status=ClusterStatus.RUNNING
    )
    for i, vm in enumerate(world.members(cluster, 2)):
        vm.node_rank, vm.private_ip = i, f"10.0.1.{i + 5}"
        vm.save()
    client = login("viewer")
    hostfile = body(client.get(f"/clusters/{cluster.pk}/hostfile/"))
    assert [line.split("  #")[0] for line in hostfile.splitlines()] == [
        "10.0.1.5 slots=1",
        "10.0.1.6 slots=1",
    ]
    assert "torchrun --nproc_per_node=1 --nnodes=2" in body(client.get(f"/clusters/{cluster.pk}/"))


def test_the_members_tab_shows_each_rank_address_and_how_to_connect(login, roce):
    cluster, members = roce
    HostKey.objects.create(
        vm=members["b"],
        key_type="ssh-ed25519",
        public_key="ssh-ed25519 AAAA",
        fingerprint=FINGERPRINT,
        reported_at=timezone.now(),
    )
    tab = body(login("viewer").get(f"/clusters/{cluster.pk}/vms/"))
    ranks = re.findall(
        r'<tr role="row" data-vm="(\w)">.*?class="num" data-label="[^"]+">(\d+)<', tab
    )
    assert ranks == [("a", "0"), ("b", "1"), ("c", "2")]
    for name in "abc":
        assert f"{members[name].fabric_ip} / GID 3" in tab  # the fabric address, as before
    # How to connect: rank 0's command and fingerprints (the others' are on their VM pages).
    first = members["a"]
    command = re.search(rf'<code id="ssh-command-{first.pk}">([^<]*)</code>', tab)
    assert command and command.group(1) == f"ssh vc@{first.private_ip}"
    assert f'data-copy="#ssh-command-{first.pk}"' in tab and "node_rank=0 · a" in tab
    assert f'id="ssh-command-{members["b"].pk}"' not in tab
    assert tab.count("게스트의 에이전트가 아직 호스트 키를 보고하지 않았습니다.") == 1
    HostKey.objects.filter(vm=members["b"]).update(vm=first)
    tab = body(login("viewer").get(f"/clusters/{cluster.pk}/vms/"))
    assert f"ssh-ed25519 {FINGERPRINT}" in tab


def test_the_vm_page_shows_the_ssh_command_and_the_fingerprints(world, login):
    vm = world.vm("alone", private_ip="10.0.0.9", status=VmStatus.RUNNING)
    page = body(login("viewer").get(f"/vms/{vm.pk}/"))
    assert "SSH 접속" in page and "ssh vc@10.0.0.9" in page
    assert f'data-copy="#ssh-command-{vm.pk}"' in page
    assert "게스트의 에이전트가 아직 호스트 키를 보고하지 않았습니다." in page
    HostKey.objects.create(
        vm=vm,
        key_type="ssh-ed25519",
        public_key="ssh-ed25519 AAAA",
        fingerprint=FINGERPRINT,
        reported_at=timezone.now(),
    )
    page = body(login("viewer").get(f"/vms/{vm.pk}/"))
    assert f"ssh-ed25519 {FINGERPRINT}" in page
    assert "아직 호스트 키를" not in page


def test_the_ssh_block_escapes_what_it_shows():
    html = ssh_block(3, "10.0.0.1<x>", [("ssh-ed25519", "SHA256:<b>")], "n <i>")
    assert "<x>" not in html and "<b>" not in html and "<i>" not in html
    assert ssh_block(3, None, [], "n") == ""
