"""Request bodies the API tests send: a valid create of each kind, with fields overridden."""


def _create(world, **fields):
    return {"zone_id": world.zone_a.pk, "instance_type_id": world.h100.pk, **fields}


def cluster_body(world, **kw):
    return _create(world, name="api-c", fabric_type="INFINIBAND") | kw


def vm_body(world, **kw):
    return _create(world, name="api-v", billing_type="ON_DEMAND") | kw
