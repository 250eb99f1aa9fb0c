"""GET zones, GET instance-types (with the fabrics each offers in each zone)."""

from collections import defaultdict
from itertools import groupby
from operator import itemgetter
from typing import NamedTuple

from ninja import Router

from portal.api.schemas import InstanceTypeOut, ZoneOut
from portal.catalog.models import FabricOffering, InstanceType, Zone

router = Router(tags=["catalog"])


class Offered(NamedTuple):
    """A type's offering in one zone, as OfferingOut reads it: the zone and its fabrics."""

    zone_id: int
    zone_code: str
    fabrics: list[str]


@router.get("/zones", response=list[ZoneOut], summary="가용 영역 목록")
def list_zones(request):
    return list(Zone.objects.order_by("code").only("id", "code", "name"))


@router.get("/instance-types", response=list[InstanceTypeOut], summary="인스턴스 유형 목록")
def list_instance_types(request, zone: str | None = None):
    """``zone`` (a zone code) keeps the types offered there, with that zone's fabrics."""
    offerings = FabricOffering.objects.all()
    if zone:
        offerings = offerings.filter(zone__code=zone)
    # One row an offering, in the order the answer lists them, grouped by type and zone here,
    # not by the database's array aggregate: the same SQL on PostgreSQL and on the demo's
    # SQLite, and a catalog is a few dozen rows.
    rows = offerings.values_list("instance_type_id", "zone_id", "zone__code", "fabric").order_by(
        "zone__code", "zone_id", "instance_type_id", "fabric"
    )
    offered = defaultdict(list)
    for (type_id, zone_id, zone_code), group in groupby(rows, key=itemgetter(0, 1, 2)):
        offered[type_id].append(Offered(zone_id, zone_code, [row[3] for row in group]))
    types = list(InstanceType.objects.filter(pk__in=list(offered)).order_by("code"))
    for instance_type in types:
        instance_type.offered = offered[instance_type.pk]  # type: ignore[attr-defined]
    return types
