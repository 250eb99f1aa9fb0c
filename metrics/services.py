"""The one state change metrics has: issuing (or rotating) a VM's agent token."""

import secrets

from django.utils import timezone

from metrics.ingest import TOKEN_PREFIX, hash_token
from metrics.models import MetricsToken
from portal.audit import attempt
from portal.kernel import check_perm, recorded_user
from portal.models import readable
from portal.permissions import Perm
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
            },
        )
    return vm, token
