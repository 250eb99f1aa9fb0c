"""The compute app, below clusters and vms: the infrastructure VMs run on — the backends
that run them (``backends``), the libvirt backend's GPU hosts with their devices, placements
and fabric partitions, the simulator's capacity (``models``), a platform admin's audited host
changes (``hosts``) and the hook through which the metrics app gives a guest its token
(``hooks``). It imports the models of vms and clusters, never their services, views or
operations."""
