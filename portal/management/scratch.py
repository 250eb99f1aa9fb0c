"""A throw-away PostgreSQL database for the benchmark commands (never the portal's own)."""

from contextlib import contextmanager

from django.db import connection


@contextmanager
def scratch_database(name, *, keep, say):
    """Create and migrate database ``name``, point the default connection at it, and drop it
    afterwards unless ``keep``."""
    creation = connection.creation
    original_name = connection.settings_dict["NAME"]
    connection.settings_dict["TEST"] = {**connection.settings_dict.get("TEST", {}), "NAME": name}
    say(f"creating and migrating database {name} …")
    creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield
    finally:
        if keep:
            say(f"kept database {connection.settings_dict['NAME']}")
        else:
            creation.destroy_test_db(original_name, verbosity=0)


def bench_catalog():
    """One zone, an 8×H100 type offering both fabrics with room for anything, and the built-in
    roles (created by a migration, but a scratch database built for tests has them flushed).
    Returns (zone, instance type, {fabric: SimulatorCapacity})."""
    from clusters.models import SimulatorCapacity
    from portal.models import Role
    from portal.permissions import BUILTIN_ROLES
    from vms.models import FabricOffering, FabricType, InstanceType, Zone

    zone = Zone.objects.create(code="kr-central-1a", name="Korea Central 1a")
    h100 = InstanceType.objects.create(
        code="gpu.h100x8", gpu_model="NVIDIA H100 SXM", gpu_count=8, vcpu=192, memory_gib=2048
    )
    capacity = {}
    for fabric in FabricType.values:
        FabricOffering.objects.create(zone=zone, instance_type=h100, fabric=fabric)
        capacity[fabric] = SimulatorCapacity.objects.create(
            zone=zone, instance_type=h100, fabric=fabric, total_nodes=100_000
        )
    for name, perms in BUILTIN_ROLES.items():
        Role.objects.get_or_create(name=name, defaults={"permissions": sorted(perms)})
    return zone, h100, capacity
