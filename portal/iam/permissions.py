"""The permission strings (docs/rules.md#permissions) and the built-in roles made of them."""

from enum import StrEnum


class Perm(StrEnum):
    CLUSTER_READ = "Resource.VirtualCluster.READ"
    CLUSTER_CREATE = "Resource.VirtualCluster.CREATE"
    CLUSTER_UPDATE = "Resource.VirtualCluster.UPDATE"
    CLUSTER_DELETE = "Resource.VirtualCluster.DELETE"
    VM_READ = "Resource.VirtualMachine.READ"
    VM_CREATE = "Resource.VirtualMachine.CREATE"
    VM_UPDATE = "Resource.VirtualMachine.UPDATE"
    VM_DELETE = "Resource.VirtualMachine.DELETE"
    # A project's SSH public keys (what a VM's seed installs): registered and deleted, never
    # changed; reading them is choosing them for a VM.
    SSH_KEY_READ = "Resource.SshKey.READ"
    SSH_KEY_CREATE = "Resource.SshKey.CREATE"
    SSH_KEY_DELETE = "Resource.SshKey.DELETE"
    # A project's webhooks (where its events are sent): read with their delivery log,
    # created (the secret shown once), sent a test event, deleted; never edited.
    WEBHOOK_READ = "Resource.Webhook.READ"
    WEBHOOK_CREATE = "Resource.Webhook.CREATE"
    WEBHOOK_UPDATE = "Resource.Webhook.UPDATE"
    WEBHOOK_DELETE = "Resource.Webhook.DELETE"


ALL_PERMISSIONS = frozenset(Perm)
READ_PERMISSIONS = frozenset(
    {Perm.CLUSTER_READ, Perm.VM_READ, Perm.SSH_KEY_READ, Perm.WEBHOOK_READ}
)

BUILTIN_ROLES = {
    "viewer": READ_PERMISSIONS,
    "operator": READ_PERMISSIONS | {Perm.CLUSTER_UPDATE, Perm.VM_UPDATE, Perm.WEBHOOK_UPDATE},
    "admin": ALL_PERMISSIONS,
}
