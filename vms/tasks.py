from celery import shared_task

from portal.foundation.broker import IDEMPOTENT
from vms import health, progress


@shared_task(**IDEMPOTENT)
def advance_vm(vm_id):
    progress.advance_vm(vm_id)


@shared_task(**IDEMPOTENT)
def delete_vm_resources(vm_id):
    """What a deleted VM held in the backend (domain, disk, addresses); the reconciler does
    it again for a deleted VM whose domain it still sees."""
    progress.delete_resources(vm_id)


@shared_task(ignore_result=True)
def sweep_health():
    """The agents of running members, silent or back (``vms.health.sweep``). Not retried
    and not acked late: the next tick says the same again."""
    return len(health.sweep())
