"""The state changes metrics has: issuing (or rotating) a VM's agent token, and revoking it."""

import secrets

from django.utils import timezone

from metrics.ingest.batch import TOKEN_PREFIX, hash_token
from metrics.models import MetricsToken
from portal.foundation.audit import attempt
from portal.foundation.kernel import check_perm, recorded_user
from portal.iam.permissions import Perm
from portal.models import readable
from vms.models import VirtualMachine


def rotate_token(vm_id, *, actor):
    """Issue a new token for VM ``vm_id``, invalidating the previous one at once.

    Needs ``Resource.VirtualMachine.UPDATE`` on the VM. Returns ``(vm, token)``: the token
    exists only in this return value; the database keeps its SHA-256. Audited.
    """
    with attempt("vm.metrics_token", actor=actor, target_type="vm", target_id=vm_id) as att:
        # A VM the actor may not read is not found (404), as everywhere; one it reads but may
        # not change is refused (403).
        vms = readable(actor, Perm.VM_READ, VirtualMachine).select_for_update(of=("self",))
        vm = vms.get_or_404(vm_id)
        att.about(vm)
        check_perm(actor, Perm.VM_UPDATE, vm)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        MetricsToken.objects.update_or_create(
            vm=vm,
            defaults={
                "token_hash": hash_token(token),
                "prefix": token[:12],
                "created_by": recorded_user(actor),
                "created_at": timezone.now(),
                "last_seen_at": None,  # no agent has called with this one yet
            },
        )
    return vm, token


def revoke_token(vm_id, *, actor) -> bool:
    """Revoke VM ``vm_id``'s token, if it has one: from now on it writes nothing (401) until
    a token is issued again. The libvirt backend calls it when the VM stops, so a stopped
    VM's seed carries no token that works; its next start issues a new one.

    Needs ``Resource.VirtualMachine.UPDATE`` on the VM, as issuing does. Audited when there
    was a token to revoke; returns whether there was one.
    """
    # None, or a deleted VM's (the ingest refuses that one already), or a VM the actor may
    # not read: nothing to revoke, nothing to record.
    vms = readable(actor, Perm.VM_READ, VirtualMachine)
    if not MetricsToken.objects.filter(vm_id=vm_id, vm__in=vms).exists():
        return False
    with attempt("vm.metrics_token_revoke", actor=actor, target_type="vm", target_id=vm_id) as att:
        vm = vms.get_or_404(vm_id)
        att.about(vm)
        check_perm(actor, Perm.VM_UPDATE, vm)
        revoked, _by_model = MetricsToken.objects.filter(vm=vm).delete()
    return revoked > 0
