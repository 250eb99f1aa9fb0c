from celery import shared_task

from clusters.tasks import IDEMPOTENT
from vms import progress


@shared_task(**IDEMPOTENT)
def advance_vm(vm_id):
    progress.advance_vm(vm_id)
