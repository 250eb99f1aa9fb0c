"""A VM's health in the API and in ``vc``: the state, its label and evidence in the caller's
language, when it changed; a reader of the project sees it, another project's user does not
see the VM at all."""

from django.utils import translation

from vc_cli import output
from vms import health
from vms.models import VmHealth


class Args:
    output = "table"


def test_a_vms_health_is_in_its_detail_and_the_list(api, world, secrets, capsys):
    vm = world.vm("gpu-node-07")
    calm = world.vm("gpu-node-08")
    health.gpu_error(vm.pk, "gpu_xid", {"gpu": 4, "xid": 79, "at": 0})
    got = api.get(f"/virtual-machines/{vm.pk}", token=secrets["viewer"]).json()
    assert got["health"] == "SUSPECT" and got["health_label"] == "의심"
    assert got["health_evidence"] == "GPU 4에서 XID 79 오류가 발생했습니다."
    assert got["health_changed_at"] is not None
    english = api.get(
        f"/virtual-machines/{vm.pk}", token=secrets["viewer"], headers={"Accept-Language": "en"}
    ).json()
    assert english["health_label"] == "Suspect" and "XID 79" in english["health_evidence"]
    assert "오류" not in english["health_evidence"]
    listed = api.get("/virtual-machines", token=secrets["viewer"]).json()["items"]
    rows = {row["name"]: row for row in listed}
    assert rows["gpu-node-07"]["health"] == VmHealth.SUSPECT
    assert rows["gpu-node-08"]["health"] == VmHealth.OK
    assert rows["gpu-node-08"]["health_evidence"] == ""
    assert rows["gpu-node-08"]["health_changed_at"] is None
    # vc's table names the health beside the status; its detail shows every field.
    translation.activate("ko")
    output.show(Args(), listed, "vm")
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:4] == ["ID", "NAME", "STATUS", "HEALTH"]
    assert any(
        line.split()[1:4] == ["gpu-node-07", "STOPPED", "SUSPECT"] for line in table.splitlines()
    )
    output.show(Args(), got, "vm")
    detail = capsys.readouterr().out
    assert "health_evidence" in detail and "GPU 4에서 XID 79 오류가 발생했습니다." in detail
    # Another project's user: not found.
    assert api.get(f"/virtual-machines/{vm.pk}", token=secrets["other"]).status_code == 404
    others = api.get("/virtual-machines", token=secrets["other"]).json()["items"]
    assert calm.pk not in {row["id"] for row in others}
