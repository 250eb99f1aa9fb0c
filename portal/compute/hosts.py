"""A platform admin's changes of GPU hosts (the admin's add, change and delete, and its
동기화), each leaving an audit event: who, which host, and what changed — the URI always,
before and after. Hosts belong to no project: their events have none, and only platform
admins read them."""

from portal.compute.models.hosts import GpuHost
from portal.foundation.audit import Attempt, attempt, record
from portal.foundation.errors import BackendError
from portal.foundation.errors.hosts import HostUriRefused
from portal.models import AuditEvent

TARGET = "gpu_host"
# What an event tells of a host, in this order (the URI first).
AUDITED = (
    "uri", "name", "zone", "domain_type", "state", "fabric", "block", "leaf", "rack",
    "storage_pool", "emulated_gpus", "emulated_gpu_model", "emulated_vfs",
    "emulated_numa_nodes",
)  # fmt: skip


def _values(host: GpuHost) -> dict[str, str]:
    return {name: str(getattr(host, name)) for name in AUDITED}


def _about(att: Attempt, host: GpuHost) -> None:
    att.target_id, att.target_name = host.pk, host.name


def _described(values: dict[str, str]) -> str:
    """``uri=…; name=…; …``: the fields that hold something."""
    return "; ".join(f"{name}={value}" for name, value in values.items() if value != "")


def _changes(before: dict[str, str], after: dict[str, str]) -> str:
    """``uri: old → new; state: …`` for each field that changed; an unchanged URI is named
    as it stays (``uri=…``)."""
    changed = [f"{n}: {before[n]} → {after[n]}" for n in AUDITED if before[n] != after[n]]
    if before["uri"] == after["uri"]:
        changed.insert(0, f"uri={after['uri']}")
    return "; ".join(changed)


def save_host(host: GpuHost, *, actor: object) -> None:
    """Create or change ``host`` (already validated by its form), audited as
    ``host.create`` or ``host.update`` with the values before and after."""
    existing = None if host.pk is None else GpuHost.objects.filter(pk=host.pk).first()
    action = "host.create" if existing is None else "host.update"
    with attempt(action, actor=actor, target_type=TARGET) as att:
        host.save()
        _about(att, host)
        after = _values(host)
        att.message = _described(after) if existing is None else _changes(_values(existing), after)


def delete_host(host: GpuHost, *, actor: object) -> None:
    """Delete ``host``, audited as ``host.delete`` with what it was."""
    with attempt("host.delete", actor=actor, target_type=TARGET) as att:
        _about(att, host)
        att.message = _described(_values(host))
        host.delete()


def sync(host: GpuHost, *, actor: object) -> int:
    """The admin's 동기화 of ``host``, audited as ``host.sync``: its device count, or its
    refusal (a URI the rule refuses) or failure (unreachable), re-raised for the admin."""
    from portal.compute.backends.libvirt.inventory import sync_host  # libvirt, loaded late

    att = Attempt(action="host.sync", actor=actor, target_type=TARGET)
    _about(att, host)
    try:
        count = sync_host(host)
    except BackendError as exc:
        refused = isinstance(exc, HostUriRefused)
        record(att, AuditEvent.Outcome.REFUSED if refused else AuditEvent.Outcome.FAILED, exc)
        raise
    att.notice("host_synced", count=count)
    att.message = f"uri={host.uri}"
    record(att, AuditEvent.Outcome.SUCCEEDED)
    return count
