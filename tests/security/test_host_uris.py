"""GPU host URIs run nothing: the admin refuses every URI parameter but the few the portal
documents (and user-info, host and path tricks) with a Korean field error and saves nothing;
a bad URI stored around the form is refused before libvirt opens it (동기화, the beat's sync,
the reconciler); every change of a host is audited with its URI before and after."""

import pytest
from django.utils import translation
from django.utils.html import escape

from clusters import progress
from portal.compute.backends.libvirt import LibvirtBackend, connection
from portal.compute.backends.libvirt.inventory import sync_all, sync_host
from portal.compute.models.hosts import GpuHost, uri_refusal
from portal.foundation.errors.hosts import HostUriRefused
from portal.models import AuditEvent
from tests.libvirt_testhost import write_hosts

pytestmark = pytest.mark.django_db
ADMIN = "/admin/compute/gpuhost/"

HOSTILE = [
    (
        "qemu+ssh://gpu9/system?command=/tmp/run-me",
        "쓸 수 없는 매개변수입니다: command=/tmp/run-me",
    ),
    ("qemu+ssh://gpu9/system?no_verify=1", "쓸 수 없는 매개변수입니다: no_verify=1"),
    ("qemu+tls://gpu9/system?no_verify=1", "매개변수를 쓸 수 없습니다: no_verify=1"),
    ("qemu:///system?socket=/tmp/evil.sock", "쓸 수 없는 매개변수입니다: socket=/tmp/evil.sock"),
    ("qemu+ssh://gpu9/system?netcat=/tmp/nc", "쓸 수 없는 매개변수입니다: netcat=/tmp/nc"),
    ("qemu+ssh://gpu9/system?keyfile=/root/.ssh/id", "쓸 수 없는 매개변수입니다: keyfile="),
    ("qemu+ssh://gpu9/system?frobnicate=1", "쓸 수 없는 매개변수입니다: frobnicate=1"),
    ("qemu+ssh://gpu9/system?mode=auto;command=x", "영문, 숫자와"),  # libvirt splits at ;
    ("qemu+ssh://gpu9/system?%63ommand=x", "영문, 숫자와"),  # libvirt unescapes names
    ("qemu+ssh://gpu9/system?mode=auto&name=test:///default", "쓸 수 없는 매개변수입니다: name="),
    ("qemu+ssh://-oProxyCommand=x/system", "호스트나 포트가 올바르지 않습니다"),
    ("qemu+ssh://-oProxyCommand=x@gpu9/system", "사용자 이름은 qemu+ssh URI에만"),
    ("qemu+ssh://root:secret@gpu9/system", "비밀번호는 넣을 수 없습니다"),
    ("qemu+ssh://gpu9:99999/system", "호스트나 포트가 올바르지 않습니다"),
    ("qemu+ssh:///system", "호스트 이름이 필요합니다"),
    ("qemu://gpu9/system", "호스트를 쓸 수 없습니다"),
    ("qemu+ssh://gpu9/etc/passwd", "경로는 /system, /session 중 하나여야"),
    ("test:///etc/passwd", "test URI의 경로는"),
    ("qemu+tcp://gpu9/system", "중 하나로 시작해야 합니다"),
]


def host_form(world, uri, **fields):
    return {
        "name": "gpu9", "zone": world.zone_a.pk, "uri": uri, "domain_type": "",
        "state": "ENABLED", "fabric": "INFINIBAND", "storage_pool": "vc-pool",
        "emulated_gpus": 0, "emulated_vfs": 0, "emulated_numa_nodes": 1,
        "devices-TOTAL_FORMS": 0, "devices-INITIAL_FORMS": 0, **fields,
    }  # fmt: skip


@pytest.fixture
def root(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", password="pw-12345678")
    client.force_login(user)
    return user


@pytest.mark.parametrize(("uri", "words"), HOSTILE)
def test_a_hostile_uri_is_refused_on_its_field_and_nothing_is_saved(
    world, client, root, uri, words
):
    response = client.post(f"{ADMIN}add/", host_form(world, uri), HTTP_ACCEPT_LANGUAGE="ko")
    assert response.status_code == 200
    with translation.override("ko"):
        expected = uri_refusal(uri).message
    assert list(response.context["adminform"].form.errors["uri"]) == [expected]
    assert escape(words) in response.content.decode()
    assert not GpuHost.objects.exists() and not AuditEvent.objects.exists()


@pytest.mark.parametrize(("uri", "words"), HOSTILE[:3])
def test_a_host_is_not_changed_to_a_hostile_uri(world, client, root, uri, words):
    host = GpuHost.objects.create(
        name="gpu9", zone=world.zone_a, uri="qemu+ssh://gpu9/system", fabric="INFINIBAND"
    )
    response = client.post(
        f"{ADMIN}{host.pk}/change/", host_form(world, uri), HTTP_ACCEPT_LANGUAGE="ko"
    )
    assert response.status_code == 200 and escape(words) in response.content.decode()
    host.refresh_from_db()
    assert host.uri == "qemu+ssh://gpu9/system" and not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    "uri",
    [
        "qemu:///system",
        "qemu:///session?mode=legacy",
        "qemu+ssh://virt_op@gpu-9.example.com:2222/system?mode=direct&no_tty=1",
        "qemu+tls://10.0.0.9/system",
        "qemu+tls://[fd00::9]:16514/system",
        "test:///default",
        "test:///var/lib/vc-test/host-0.xml",
    ],
)
def test_the_documented_forms_are_accepted(world, client, root, uri):
    response = client.post(f"{ADMIN}add/", host_form(world, uri))
    assert response.status_code == 302 and GpuHost.objects.get().uri == uri


def test_the_uri_field_lists_what_it_accepts(world, client, root):
    page = client.get(f"{ADMIN}add/", HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert escape("mode=auto|direct|legacy") in page and "no_tty=1 (qemu+ssh)" in page


@pytest.fixture
def trap(tmp_path):
    """A program a hostile ``command=`` would run, leaving ``ran`` behind if it ever does."""
    ran = tmp_path / "ran"
    program = tmp_path / "fake-ssh"
    program.write_text(f'#!/bin/sh\necho "$@" > {ran}\nexit 1\n')
    program.chmod(0o755)
    uri = f"qemu+ssh://gpu9/system?command={program}&no_verify=1"
    yield uri, ran
    connection.forget(uri)


def stored(world, uri, name="gpu9", **fields):
    """A host whose bad URI was written around the form (before the rule, or by SQL)."""
    host = GpuHost.objects.create(
        name=name, zone=world.zone_a, uri="qemu+ssh://gpu9/system", fabric="INFINIBAND", **fields
    )
    GpuHost.objects.filter(pk=host.pk).update(uri=uri)
    return GpuHost.objects.get(pk=host.pk)


def test_a_stored_hostile_uri_is_never_opened(world, trap, caplog):
    uri, ran = trap
    host = stored(world, uri)
    caplog.set_level("ERROR", logger="portal.compute.backends.libvirt.connection")
    with pytest.raises(HostUriRefused) as refused:
        connection.connect(host)
    assert refused.value.params == {}  # a VM's error names nothing of the URI
    assert not ran.exists()
    assert any("refused, not opened" in r.getMessage() for r in caplog.records)
    with pytest.raises(HostUriRefused) as refused:
        sync_host(host)
    assert refused.value.params["reason"] == "param"
    assert sync_all() == {"gpu9": "host_uri_refused"}
    host.refresh_from_db()
    assert host.sync_error == "host_uri_refused" and host.synced_at is None
    assert not ran.exists() and not host.devices.exists()


def test_the_reconciler_passes_over_a_host_it_refuses(world, trap, settings):
    uri, ran = trap
    settings.COMPUTE_BACKEND = "portal.compute.backends.libvirt.LibvirtBackend"
    stored(world, uri)
    assert LibvirtBackend().observe().vms == {}
    assert progress.reconcile() == []
    assert not ran.exists()


def test_the_admins_sync_refuses_a_stored_hostile_uri_and_audits_it(world, client, root, trap):
    uri, ran = trap
    host = stored(world, uri)
    emulated = stored(world, uri, name="emu9", emulated_gpus=8, emulated_gpu_model="H100")
    response = client.post(
        ADMIN,
        {"action": "sync", "_selected_action": [host.pk, emulated.pk]},
        HTTP_ACCEPT_LANGUAGE="ko",
        follow=True,
    )
    assert response.status_code == 200 and not ran.exists()
    assert escape("쓸 수 없는 매개변수입니다: command=") in response.content.decode()
    assert not emulated.devices.exists()  # not synced either, though it would open nothing
    events = AuditEvent.objects.filter(action="host.sync").order_by("target_name")
    assert [(e.target_name, e.outcome, e.code, e.actor) for e in events] == [
        ("emu9", AuditEvent.Outcome.REFUSED, "host_uri_refused", root),
        ("gpu9", AuditEvent.Outcome.REFUSED, "host_uri_refused", root),
    ]
    with translation.override("ko"):
        assert "쓸 수 없는 매개변수입니다: command=" in events[0].text


def test_every_change_of_a_host_is_audited_with_its_uri(world, client, root, tmp_path):
    (file_uri,) = write_hosts(tmp_path, 1)
    client.post(f"{ADMIN}add/", host_form(world, "qemu+ssh://gpu9/system"))
    host = GpuHost.objects.get()
    client.post(f"{ADMIN}{host.pk}/change/", host_form(world, file_uri, state="DRAINING"))
    client.post(ADMIN, {"action": "sync", "_selected_action": [host.pk]})
    client.post(
        f"{ADMIN}{host.pk}/change/", host_form(world, file_uri, state="DRAINING", rack="r9")
    )
    client.post(f"{ADMIN}{host.pk}/delete/", {"post": "yes"})
    connection.forget(file_uri)
    assert not GpuHost.objects.exists()
    events = list(AuditEvent.objects.order_by("id"))
    assert [(e.action, e.outcome, e.actor, e.target_type, e.target_id) for e in events] == [
        (action, AuditEvent.Outcome.SUCCEEDED, root, "gpu_host", host.pk)
        for action in ("host.create", "host.update", "host.sync", "host.update", "host.delete")
    ]
    create, change, sync, rack, delete = events
    assert create.message.startswith("uri=qemu+ssh://gpu9/system; name=gpu9; zone=kr-central-1a")
    assert change.message == (
        f"uri: qemu+ssh://gpu9/system → {file_uri}; state: ENABLED → DRAINING"
    )
    with translation.override("ko"):
        assert sync.text == f"장치 16개를 읽었습니다. (uri={file_uri})"
    assert rack.message == f"uri={file_uri}; rack:  → r9"
    assert delete.message.startswith(f"uri={file_uri}; name=gpu9;")
    assert all(e.project_id is None and e.target_name == "gpu9" for e in events)


def test_a_bulk_delete_audits_each_host(world, client, root):
    for name in ("gpu7", "gpu8"):
        GpuHost.objects.create(
            name=name, zone=world.zone_a, uri=f"qemu+ssh://{name}/system", fabric="INFINIBAND"
        )
    ids = list(GpuHost.objects.values_list("pk", flat=True))
    client.post(ADMIN, {"action": "delete_selected", "_selected_action": ids, "post": "yes"})
    assert not GpuHost.objects.exists()
    assert sorted(AuditEvent.objects.values_list("action", "target_name", "message")) == [
        ("host.delete", name, f"uri=qemu+ssh://{name}/system; name={name}; zone=kr-central-1a"
         "; state=ENABLED; fabric=INFINIBAND; storage_pool=vc-pool; emulated_gpus=0"
         "; emulated_vfs=0; emulated_numa_nodes=1")
        for name in ("gpu7", "gpu8")
    ]  # fmt: skip
