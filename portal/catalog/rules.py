"""The catalog's rules over its models (``vms.models``: zones, instance types, which fabrics
each type offers where). The models stay in the vms app: moving them would need
SeparateDatabaseAndState migrations."""

from portal.catalog.models import FabricOffering, InstanceType, Zone
from portal.foundation.kernel import id_for_lookup


def catalog_choice(zone_id, instance_type_id) -> tuple[Zone | None, InstanceType | None]:
    """The zone and the instance type a create names: None for one that does not exist (the
    create's rule refuses it)."""
    return (
        Zone.objects.filter(pk=id_for_lookup(zone_id)).first(),
        InstanceType.objects.filter(pk=id_for_lookup(instance_type_id)).first(),
    )


def types_offered_in(zone_id):
    """The instance types that offer a fabric in zone ``zone_id``."""
    return InstanceType.objects.filter(
        pk__in=FabricOffering.objects.filter(zone_id=zone_id).values("instance_type_id")
    )


def offered_fabrics(zone_id, instance_type_id) -> list[str]:
    """The fabrics instance type ``instance_type_id`` offers in zone ``zone_id``."""
    return list(
        FabricOffering.objects.filter(zone_id=zone_id, instance_type_id=instance_type_id)
        .order_by("fabric")
        .values_list("fabric", flat=True)
        .distinct()
    )
