"""GET zones, GET instance-types (with the fabrics each offers in each zone)."""

from collections import defaultdict

from ninja import Router

from portal.api.schemas import InstanceTypeOut, ZoneOut
from vms.models import FabricOffering, InstanceType, Zone

router = Router(tags=["catalog"])


@router.get("/zones", response=list[ZoneOut], summary="가용 영역 목록")
def list_zones(request):
    return list(Zone.objects.order_by("code").values("id", "code", "name"))


@router.get("/instance-types", response=list[InstanceTypeOut], summary="인스턴스 유형 목록")
def list_instance_types(request, zone: str | None = None):
    """``zone`` (a zone code) keeps the types offered there, with that zone's fabrics."""
    offerings = FabricOffering.objects.select_related("zone").order_by("zone__code", "fabric")
    if zone:
        offerings = offerings.filter(zone__code=zone)
    by_type: defaultdict[int, dict] = defaultdict(dict)
    for offering in offerings:
        entry = by_type[offering.instance_type_id].setdefault(
            offering.zone_id,
            {"zone_id": offering.zone_id, "zone": offering.zone.code, "fabrics": []},
        )
        entry["fabrics"].append(offering.fabric)
    types = InstanceType.objects.filter(pk__in=list(by_type)).order_by("code")
    return [
        {
            "id": t.pk,
            "code": t.code,
            "gpu_model": t.gpu_model,
            "gpu_count": t.gpu_count,
            "gpu_memory_gib": t.gpu_memory_gib,
            "vcpu": t.vcpu,
            "memory_gib": t.memory_gib,
            "offerings": list(by_type[t.pk].values()),
        }
        for t in types
    ]
