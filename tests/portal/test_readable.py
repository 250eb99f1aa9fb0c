"""``readable(user, perm, Model)``: the one "readable or not found" lookup. ``get_or_404``
and ``shows`` (the same question of a row in hand) agree for every reader and row."""

import pytest

from clusters.models import VirtualCluster
from portal.foundation.errors import ClusterNotFound, VmNotFound
from portal.iam.permissions import Perm
from portal.models import light_instances, readable, readable_row
from vms.models import VirtualMachine, VmStatus

pytestmark = pytest.mark.django_db
READERS = ["admin", "viewer", "norole", "other", "system"]


def reader(world, name):
    return None if name == "system" else world.users[name]


def answer(rows, pk):
    try:
        return rows.get_or_404(pk).pk
    except (ClusterNotFound, VmNotFound) as refusal:
        return type(refusal)


@pytest.mark.parametrize("name", READERS)
def test_get_or_404_and_shows_agree(world, name):
    user = reader(world, name)
    own, foreign = world.cluster("own"), world.cluster("foreign", project=world.other)
    alive, gone = world.vm("alive"), world.vm("gone", status=VmStatus.DELETED)
    sees_demo = name in ("admin", "viewer", "system")
    sees_other = name in ("other", "system")
    clusters = readable(user, Perm.CLUSTER_READ, VirtualCluster)
    vms = readable(user, Perm.VM_READ, VirtualMachine)
    expected = {
        (clusters, own): sees_demo,
        (clusters, foreign): sees_other,
        (vms, alive): sees_demo,
        (vms, gone): False,  # a deleted VM is gone for everyone, the system included
    }
    for (rows, obj), seen in expected.items():
        assert rows.shows(obj) is seen, (name, obj)
        assert answer(rows, obj.pk) == (obj.pk if seen else rows.not_found)
        assert rows.shown([obj]) == ([obj] if seen else []), (name, obj)
        # The same rule compiled ahead (every cluster page's first read).
        perm = Perm.CLUSTER_READ if rows.model is VirtualCluster else Perm.VM_READ
        assert readable_row(user, perm, rows.model, obj.pk) == (obj if seen else None)


@pytest.mark.parametrize("bad", [None, "", "x", "1.0", -1, 2**70, True])
def test_an_id_that_names_no_row_is_not_found(world, bad):
    with pytest.raises(ClusterNotFound):
        readable(world.admin, Perm.CLUSTER_READ, VirtualCluster).get_or_404(bad)


def test_a_lookup_keeps_its_reader_through_further_narrowing(world):
    cluster = world.cluster("own")
    rows = readable(world.users["viewer"], Perm.CLUSTER_READ, VirtualCluster)
    narrowed = rows.select_related("zone").select_for_update()
    assert narrowed.shows(cluster)
    with pytest.raises(TypeError):
        VirtualCluster.objects.all().shows(cluster)


def test_light_instances_are_the_rows_only_reads_and_load_the_rest_on_access(world):
    vm = world.vm("alive")
    fields = ("id", "project_id", "name", "status")
    rows = VirtualMachine.objects.filter(pk=vm.pk)
    (light,) = light_instances(rows, fields)
    (plain,) = rows.only(*fields)
    assert light == plain and type(light) is VirtualMachine
    assert {f: getattr(light, f) for f in fields} == {f: getattr(plain, f) for f in fields}
    assert light.get_deferred_fields() == plain.get_deferred_fields()
    assert light.zone_id == vm.zone_id  # a deferred field is read when asked for
    assert not light._state.adding
