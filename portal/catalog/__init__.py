"""The catalog app: what a project may run (zones, instance types, the fabrics each type
offers in each zone), its rules (``rules``) and its version (``version``), below clusters
and vms."""
