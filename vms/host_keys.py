"""A guest's SSH host keys as its agent reports them (``POST /api/metrics/host-keys``): kept
per VM (``vms.models.HostKey``), shown with the ``ssh`` command on the VM page and the
members tab, and handed to the cluster's members for their known_hosts (``clusters.peers``).

Each key is parsed and fingerprinted here by the agent's own parser
(``metrics.vm_agent.hostkeys.parse``): the fingerprint shown is the portal's reading of the
key, never a figure the guest sent. A report replaces the VM's keys whole.
"""

from django.db import transaction
from django.utils import timezone

from metrics.vm_agent.hostkeys import MAX_KEYS, HostKeyError, parse
from vms.models import HostKey


def parsed_keys(lines: object) -> list[dict]:
    """The keys of a report (a list of ``type base64 [comment]`` lines), one per type;
    ``HostKeyError`` for anything else."""
    if not isinstance(lines, list) or len(lines) > MAX_KEYS:
        raise HostKeyError(f"host_keys must be a list of at most {MAX_KEYS} key lines")
    keys: dict[str, dict] = {}
    for index, line in enumerate(lines):
        try:
            key = parse(line)
        except HostKeyError as exc:
            raise HostKeyError(f"host_keys[{index}]: {exc}") from exc
        if key["type"] in keys:
            raise HostKeyError(f"host_keys[{index}]: a second {key['type']} key")
        keys[key["type"]] = key
    return list(keys.values())


def replace_host_keys(vm_id: int, keys: list[dict]) -> bool:
    """Keep ``keys`` (``parsed_keys``) as the VM's host keys; returns whether they changed."""
    wanted = {(key["type"], key["key"]) for key in keys}
    with transaction.atomic():
        rows = HostKey.objects.select_for_update().filter(vm_id=vm_id)
        if {(row.key_type, row.public_key) for row in rows} == wanted:
            return False
        rows.delete()
        now = timezone.now()
        HostKey.objects.bulk_create(
            HostKey(
                vm_id=vm_id,
                key_type=key["type"],
                public_key=key["key"],
                fingerprint=key["fingerprint"],
                reported_at=now,
            )
            for key in keys
        )
    return True


def shown_host_keys(vm_ids) -> dict[int, list[tuple[str, str]]]:
    """(type, fingerprint) of each VM's keys, for the pages."""
    found: dict[int, list[tuple[str, str]]] = {}
    rows = HostKey.objects.filter(vm_id__in=list(vm_ids)).order_by("vm_id", "key_type")
    for vm_id, kind, fingerprint in rows.values_list("vm_id", "key_type", "fingerprint"):
        found.setdefault(vm_id, []).append((kind, fingerprint))
    return found
