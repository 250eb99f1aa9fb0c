from celery import shared_task

from clusters.tasks import IDEMPOTENT
from vms import services


@shared_task(**IDEMPOTENT)
def advance_vm(vm_id):
    services.advance_vm(vm_id)
