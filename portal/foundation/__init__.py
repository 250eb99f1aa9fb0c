"""What every app stands on: the kernel (the permission check, lifecycles, names, ids,
queueing after commit), the typed errors, the audit trail and the words of its events, and
the broker that queues tasks without ever failing the user's request."""
