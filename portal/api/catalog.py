"""GET zones, GET instance-types (with the fabrics each offers in each zone)."""

from collections import defaultdict

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import F
from ninja import Router

from portal.api.schemas import InstanceTypeOut, ZoneOut
from vms.models import FabricOffering, InstanceType, Zone

router = Router(tags=["catalog"])


@router.get("/zones", response=list[ZoneOut], summary="가용 영역 목록")
def list_zones(request):
    return list(Zone.objects.order_by("code").only("id", "code", "name"))


@router.get("/instance-types", response=list[InstanceTypeOut], summary="인스턴스 유형 목록")
def list_instance_types(request, zone: str | None = None):
    """``zone`` (a zone code) keeps the types offered there, with that zone's fabrics."""
    offerings = FabricOffering.objects.all()
    if zone:
        offerings = offerings.filter(zone__code=zone)
    # One row a type and zone, as OfferingOut reads it: the zone's code and its fabrics.
    grouped = (
        offerings.values("instance_type_id", "zone_id")
        .annotate(zone_code=F("zone__code"), fabrics=ArrayAgg("fabric", order_by="fabric"))
        .order_by("zone__code", "zone_id")
    )
    offered = defaultdict(list)
    for row in grouped:
        offered[row["instance_type_id"]].append(row)
    types = list(InstanceType.objects.filter(pk__in=list(offered)).order_by("code"))
    for instance_type in types:
        instance_type.offered = offered[instance_type.pk]  # type: ignore[attr-defined]
    return types
