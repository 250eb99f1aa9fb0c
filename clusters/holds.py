"""A 교체's spare is held for it: from the moment the replace is accepted until the spare has
joined the cluster (or the replace has failed), nothing else may start, delete or attach it.
Without the hold, a spare taken meanwhile made the swap refuse after the running member had
already been stopped, leaving the member stopped and not replaced.

The hold is the replace's own spare item (``OperationItem`` position 1) while it is pending
and not yet started, within the replace's walk (twice the transition timeout, as
``advance_replace`` looks): no column of its own, so nothing can outlive the replace.

A cluster's 예비 (``ClusterSpare``) is held the same way for as long as it is one: only its
own cluster's 교체 may take it (``pool``); starting, deleting or attaching it otherwise is
refused with ``VmIsSpare`` until it is taken out of the spares.
"""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from clusters.models import ClusterSpare, Operation, OperationItem, VirtualCluster
from portal.foundation.errors import RuleViolation, VmHeldForReplace, VmIsSpare
from vms.models import VirtualMachine


def holding_replace(vm: VirtualMachine | None, *, but: Operation | None = None) -> Operation | None:
    """The open 교체 that holds ``vm`` as its spare (other than ``but``), or None."""
    if vm is None or vm.cluster_id is not None:  # a spare that has joined is held no more
        return None
    since = timezone.now() - timedelta(seconds=2 * settings.TRANSITION_TIMEOUT_SECONDS)
    items = OperationItem.objects.filter(
        vm_id=vm.pk,
        position=1,
        status=OperationItem.Status.PENDING,
        started_at__isnull=True,
        operation__kind=Operation.Kind.REPLACE,
        operation__created_at__gte=since,
    ).select_related("operation")
    if but is not None:
        items = items.exclude(operation_id=but.pk)
    item = items.first()
    return item.operation if item is not None else None


def spare_pool_of(vm: VirtualMachine | None) -> int | None:
    """The id of the cluster that keeps ``vm`` as a 예비, or None."""
    if vm is None or vm.pk is None:
        return None
    return ClusterSpare.objects.filter(vm_id=vm.pk).values_list("cluster_id", flat=True).first()


def hold_refusal(
    vm: VirtualMachine | None,
    *,
    but: Operation | None = None,
    pool: VirtualCluster | None = None,
) -> RuleViolation | None:
    """``VmHeldForReplace`` while ``vm`` is the spare of an open 교체 (other than ``but``);
    ``VmIsSpare`` while it is a 예비 of a cluster other than ``pool`` (a 교체 of ``pool``
    may take its own)."""
    if holding_replace(vm, but=but) is not None:
        return VmHeldForReplace()
    kept_by = spare_pool_of(vm)
    if kept_by is not None and (pool is None or kept_by != pool.pk):
        return VmIsSpare()
    return None
