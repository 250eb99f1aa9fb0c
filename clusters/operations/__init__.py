"""Cluster-scale actions, each recorded as one ``Operation`` with an item per VM.

Every item is decided by the single-VM action's own rule function and written by its own
write (``clusters.services``, ``vms.services``), with its own audit event, so every rule holds
per VM and one refusal never undoes or blocks the others. Membership changes are done in
the request (one transaction, rows locked in the fixed order); starts and stops are fanned
out to workers (``run_items``), and ``watch`` marks each item once its VM settles, then
finishes the operation (stopping the cluster last for ``stop_cluster_with_members``).

This module sits above the services: nothing below it imports it. The tasks that run its
work are in ``clusters.tasks``; it queues them by name.
"""

from clusters.operations.cancel import cancel_operation, cancel_refusal, preflight_cancel
from clusters.operations.fanout import (
    run_items,
    start_members,
    stop_cluster_with_members,
    stop_members,
    watch,
    watch_stale,
)
from clusters.operations.membership import attach_many, create_vms, detach_many, require_create_vms
from clusters.operations.reads import attach_candidates, visible_operations
from clusters.operations.replace import (
    advance_replace,
    member_refusal,
    preflight_member_replace,
    preflight_replace,
    replace_member,
    replace_refusal,
    replaces_of,
)
from clusters.operations.single import (
    attach_vm_op,
    cluster_ssh_keys_op,
    create_cluster_op,
    delete_cluster_op,
    delete_vm_op,
    detach_vm_op,
    policy_op,
    rename_cluster_op,
    rename_vm_op,
    require_create_cluster,
    spare_add_op,
    spare_remove_op,
    start_cluster_op,
    start_vm_op,
    stop_cluster_op,
    stop_vm_op,
)
from clusters.operations.validate import rank_order, start_validation, watch_validation
from clusters.spares import spare_refusal

__all__ = [
    "attach_candidates",
    "cancel_operation",
    "cancel_refusal",
    "attach_vm_op",
    "attach_many",
    "cluster_ssh_keys_op",
    "create_cluster_op",
    "create_vms",
    "delete_cluster_op",
    "delete_vm_op",
    "detach_many",
    "detach_vm_op",
    "member_refusal",
    "preflight_cancel",
    "preflight_member_replace",
    "preflight_replace",
    "policy_op",
    "rename_cluster_op",
    "rename_vm_op",
    "require_create_cluster",
    "require_create_vms",
    "advance_replace",
    "replace_member",
    "replace_refusal",
    "replaces_of",
    "spare_add_op",
    "spare_refusal",
    "spare_remove_op",
    "run_items",
    "start_cluster_op",
    "start_members",
    "start_vm_op",
    "stop_cluster_op",
    "stop_cluster_with_members",
    "stop_members",
    "stop_vm_op",
    "rank_order",
    "start_validation",
    "watch_validation",
    "visible_operations",
    "watch",
    "watch_stale",
]
