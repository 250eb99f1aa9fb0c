"""The catalog app: what a project may run (zones, instance types, the fabrics each type
offers in each zone) and its rules (``rules``), below clusters and vms."""
