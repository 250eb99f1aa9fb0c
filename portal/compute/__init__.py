"""The compute layer, below clusters and vms: the backends that run VMs (``backends``),
the lock order (``locking``), a spare's hold by a 교체 (``holds``) and the catalog's
query (``catalog``). It imports the models of vms and clusters, never their services,
views or operations."""
