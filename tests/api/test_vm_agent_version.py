"""A VM's detail says which version of the metrics agent runs on it (what the agent last
reported, ``metrics.agent_versions``); null until one has. The lists do not join for it."""

from metrics import services
from metrics.models import MetricsToken
from metrics.vm_agent import VERSION
from vms.models import VmStatus


def test_the_vm_detail_says_the_agents_version(api, secrets, world):
    vm = world.vm("agent-detail", status=VmStatus.RUNNING)
    viewer = secrets["viewer"]
    detail = api.get(f"/virtual-machines/{vm.pk}", token=viewer)
    assert detail.status_code == 200 and detail.json()["agent_version"] is None
    services.rotate_token(vm.pk, actor=None)  # a token, but no agent has reported yet
    assert api.get(f"/virtual-machines/{vm.pk}", token=viewer).json()["agent_version"] is None
    MetricsToken.objects.filter(vm=vm).update(agent_version=VERSION)
    assert api.get(f"/virtual-machines/{vm.pk}", token=viewer).json()["agent_version"] == VERSION
    renamed = api.patch(
        f"/virtual-machines/{vm.pk}", {"name": "agent-detail-2"}, token=secrets["admin"]
    )
    assert renamed.status_code == 200 and renamed.json()["agent_version"] == VERSION
    listed = api.get("/virtual-machines", token=viewer).json()["items"]
    assert "agent_version" not in next(item for item in listed if item["id"] == vm.pk)
