"""A libvirt guest's NoCloud seed (cloud-init's format): hostname, its own metrics token and the
portal URL, the fabric NIC's static address matched by MAC, on an ISO 9660 volume labelled
``cidata``; and a clear error when no guest image was built."""

import io
import json

import pycdlib
import pytest

from portal.compute.backends.base import FabricAddress
from portal.compute.backends.libvirt import names
from portal.compute.backends.libvirt.guest import boot as guest
from portal.compute.backends.libvirt.guest import image as guest_image
from portal.foundation.errors import GuestImageMissing


class Vm:
    def __init__(self, pk, name):
        self.pk, self.name = pk, name


def test_the_seed_carries_hostname_token_portal_url_and_the_fabric_address():
    vm = Vm(42, "GPU-노드-01")
    files = guest.seed_files(
        vm,
        fabric_address=FabricAddress(ip="172.16.8.12"),
        portal_url="http://10.0.2.2:8000/",
        metrics_token="vcm_secret",
    )
    assert set(files) == {"meta-data", "user-data", "network-config"}
    meta = json.loads(files["meta-data"])
    assert meta == {"instance-id": names.domain_name(42), "local-hostname": "gpu-01"}
    assert files["user-data"].startswith(b"#cloud-config\n")
    user = json.loads(files["user-data"].split(b"\n", 1)[1])
    env = next(f for f in user["write_files"] if f["path"] == "/etc/vc-metrics.env")
    assert env["permissions"] == "0600"
    assert "METRICS_AGENT_URL=http://10.0.2.2:8000/api/metrics/ingest\n" in env["content"]
    assert "METRICS_AGENT_TOKEN=vcm_secret\n" in env["content"]
    assert any("vc-metrics-agent" in " ".join(cmd) for cmd in user["runcmd"])
    network = json.loads(files["network-config"])
    assert network == {
        "version": 2,
        "ethernets": {
            "mgmt": {"match": {"name": "e*"}, "dhcp4": True},
            "fabric": {
                "match": {"macaddress": guest.fabric_mac(vm)},
                "dhcp4": False,
                "addresses": ["172.16.8.12/21"],
            },
        },
    }
    assert guest.fabric_mac(Vm(43, "x")) != guest.fabric_mac(vm)
    no_fabric = guest.seed_files(vm, fabric_address=None, portal_url="http://h", metrics_token="t")
    assert "fabric" not in json.loads(no_fabric["network-config"])["ethernets"]


def test_the_vms_keys_are_the_meta_datas_public_keys():
    vm = Vm(42, "node")
    keys = ["ssh-ed25519 AAAAC3Nz me@laptop", "ssh-rsa AAAAB3Nz"]
    files = guest.seed_files(
        vm, fabric_address=None, portal_url="http://h", metrics_token="t", ssh_keys=keys
    )
    meta = json.loads(files["meta-data"])
    assert meta["public-keys"] == keys
    assert meta["instance-id"] == names.domain_name(42)


@pytest.mark.django_db
def test_public_keys_are_the_ones_the_vm_still_carries(world):
    from portal.iam import ssh_keys
    from tests.ssh_keys_data import ED25519, ED25519_OTHER

    vm = world.vm("node")
    one, two = (
        ssh_keys.create_ssh_key(actor=world.admin, project=world.demo, name=n, public_key=k)
        for n, k in (("one", ED25519), ("two", ED25519_OTHER))
    )
    vm.ssh_keys.set([one, two])
    assert guest.public_keys(vm) == [ED25519, ED25519_OTHER]
    ssh_keys.delete_ssh_key(two.pk, actor=world.admin)
    assert guest.public_keys(vm) == [ED25519]


def test_a_name_without_ascii_gets_a_hostname_from_its_id():
    assert guest.hostname(Vm(7, "노드")) == "vm-7"


def test_the_seed_iso_is_labelled_cidata_with_the_files_by_their_names(tmp_path):
    files = {
        "meta-data": b"{}\n",
        "user-data": b"#cloud-config\n{}\n",
        "network-config": b'{"version": 2}\n',
    }
    path = tmp_path / "seed.iso"
    guest.write_seed_iso(files, path)
    iso = pycdlib.PyCdlib()
    iso.open(str(path))
    try:
        assert iso.pvd.volume_identifier.decode().strip() == "cidata"
        for name, data in files.items():
            out = io.BytesIO()
            iso.get_file_from_iso_fp(out, rr_path=f"/{name}")
            assert out.getvalue() == data
            out = io.BytesIO()
            iso.get_file_from_iso_fp(out, joliet_path=f"/{name}")
            assert out.getvalue() == data
    finally:
        iso.close()


@pytest.mark.django_db
def test_without_a_built_image_starting_says_to_build_it(settings, tmp_path):
    settings.GUEST_IMAGE_DIR = str(tmp_path)
    assert guest_image.current() is None
    with pytest.raises(GuestImageMissing) as raised:
        guest.guest_boot(Vm(1, "a"), pool=None)
    assert "build_guest_image" in raised.value.message


@pytest.mark.django_db
def test_a_members_seed_has_its_own_keys_then_its_clusters_each_once(world):
    from portal.iam import ssh_keys
    from tests.ssh_keys_data import ED25519, ED25519_OTHER, RSA_2048

    one, two, three = (
        ssh_keys.create_ssh_key(actor=world.admin, project=world.demo, name=n, public_key=k)
        for n, k in (("one", ED25519), ("two", ED25519_OTHER), ("three", RSA_2048))
    )
    cluster = world.cluster()
    vm, peer = world.members(cluster, 2)
    vm.ssh_keys.set([two])
    cluster.ssh_keys.set([three, one, two])
    assert guest.public_keys(vm) == [ED25519_OTHER, ED25519, RSA_2048]
    assert guest.public_keys(peer) == [ED25519, ED25519_OTHER, RSA_2048]
    loose = world.vm("loose")  # no cluster: its own keys only, none here
    assert guest.public_keys(loose) == []
    cluster.ssh_keys.set([one])  # a change: read again at the member's next start
    assert guest.public_keys(vm) == [ED25519_OTHER, ED25519]
    ssh_keys.delete_ssh_key(one.pk, actor=world.admin)
    assert guest.public_keys(vm) == [ED25519_OTHER]
    assert guest.public_keys(peer) == []
    vm.cluster = None  # detached: the cluster's keys are no longer its
    vm.save()
    cluster.ssh_keys.set([three])
    assert guest.public_keys(vm) == [ED25519_OTHER]
