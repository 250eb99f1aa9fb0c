"""The VM pages as a user meets them: the 클러스터 section's rules
(docs/rules.md#attaching-a-vm), the member start rule (``ClusterNotRunning``), each with its
Korean message in place and nothing changed on refusal."""

import re

from clusters.models import ClusterStatus
from portal.catalog.models import FabricType
from portal.foundation import errors
from tests.pages import HX, UNATTACHABLE, body
from vms.models import BillingType, VmStatus


def test_member_start_refused_unless_cluster_runs(world, login):
    cluster = world.cluster()
    a, _b = world.members(cluster, 2)
    response = login("admin").post(f"/vms/{a.pk}/start/")
    assert response.status_code == 409
    assert "클러스터가 실행중일 때만 멤버 가상머신을 시작할 수 있습니다" in body(response)


# -- The VM page's 클러스터 section (rules 1-3) ------------------------------------------------


def test_vm_page_offers_only_eligible_clusters_and_guidance(world, login):
    good = world.cluster("good")
    world.cluster("other-type", instance_type=world.l40s, fabric_type=FabricType.ROCE_V2)
    world.cluster("busy", status=ClusterStatus.WAITING)
    world.cluster("foreign", project=world.other)
    vm = world.vm("n1")
    page = body(login("admin").get(f"/vms/{vm.pk}/"))
    assert "동일한 인스턴스 타입이며 중지된 상태의 가상머신만 연결할 수 있습니다" in page
    assert "수행할 작업" in page and "클러스터에 연결" in page
    assert "클러스터에서 분리" not in page  # a VM in no cluster is not offered 분리
    assert f'value="{good.pk}"' in page
    for name in ("other-type", "busy", "foreign"):
        assert name not in page


@UNATTACHABLE
def test_attach_refusals_on_the_vm_page(world, login, kw, reason):
    cluster = world.cluster()
    vm = world.vm("n1", **kw)
    client = login("admin")
    assert reason in body(client.get(f"/vms/{vm.pk}/"))  # said before trying
    response = client.post(
        f"/vms/{vm.pk}/cluster/", {"action": "attach", "cluster": cluster.pk}, **HX
    )
    assert response.status_code == 409 and reason in body(response)
    vm.refresh_from_db()
    assert vm.cluster_id is None


def test_attach_and_detach_from_the_vm_page(world, login):
    cluster = world.cluster("target")
    vm = world.vm("n1")
    client = login("operator")
    response = client.post(f"/vms/{vm.pk}/cluster/", {"action": "attach", "cluster": cluster.pk})
    assert response.status_code == 200 and "target 클러스터에 연결했습니다." in body(response)
    response = client.post(f"/vms/{vm.pk}/cluster/", {"action": "detach"})
    assert "클러스터에서 분리했습니다." in body(response)
    vm.refresh_from_db()
    assert vm.cluster_id is None


def test_forged_cluster_of_another_project_is_refused(world, login):
    foreign = world.cluster("foreign", project=world.other)
    vm = world.vm("n1")
    response = login("admin").post(
        f"/vms/{vm.pk}/cluster/", {"action": "attach", "cluster": foreign.pk}
    )
    assert response.status_code == 422
    vm.refresh_from_db()
    assert vm.cluster_id is None


def test_detach_that_would_leave_one_member_is_refused_on_the_page(world, login):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    a, _b = world.members(cluster, 2)
    response = login("admin").post(f"/vms/{a.pk}/cluster/", {"action": "detach"})
    assert response.status_code == 409 and "가상머신 2대 이상이 필요합니다" in body(response)


# -- A 저장 and the rest of the page ------------------------------------------------------


def test_the_action_starts_at_nothing(world, login):
    world.cluster("target")
    member = world.members(world.cluster("joined"), 1)[0]
    client = login("admin")
    for vm in (world.vm("n1"), member):
        page = body(client.get(f"/vms/{vm.pk}/"))
        action = page.split('name="action"')[1].split("</select>")[0]
        assert '<option value="" selected>' in action and action.count("selected") == 1


def test_a_save_brings_the_header_and_delete_panel_it_changed(world, login):
    cluster = world.cluster("target")
    vm = world.vm("n1")
    client = login("admin")
    assert 'id="vm-delete" class="panel danger-zone"' in body(client.get(f"/vms/{vm.pk}/"))
    attached = body(
        client.post(f"/vms/{vm.pk}/cluster/", {"action": "attach", "cluster": cluster.pk}, **HX)
    )
    assert 'id="cluster-section"' in attached
    header = attached.split('<section id="vm-status"')[1].split("</section>")[0]
    assert header.startswith(' class="detail-header" hx-swap-oob="true"') and "target" in header
    # A member's delete is shown disabled, with the rule that refuses it.
    delete_panel = attached.split('<section id="vm-delete"')[1].split("</section>")[0]
    assert delete_panel.startswith(' class="panel danger-zone" hx-swap-oob="true"')
    assert "disabled" in delete_panel and errors.VmIsMember().message in delete_panel
    detached = body(client.post(f"/vms/{vm.pk}/cluster/", {"action": "detach"}, **HX))
    assert 'id="vm-delete" class="panel danger-zone" hx-swap-oob="true"' in detached
    renamed = body(client.post(f"/vms/{vm.pk}/", {"name": "n1-renamed"}, **HX))
    assert 'id="basics"' in renamed
    assert '<span id="crumb-name" hx-swap-oob="true">n1-renamed</span>' in renamed
    assert "<title>n1-renamed · 가상머신 · GPU 클라우드 콘솔</title>" in renamed


def test_a_refused_save_changes_nothing_else_on_the_page(world, login):
    vm = world.vm("n1", billing_type=BillingType.SPOT)
    cluster = world.cluster("target")
    client = login("admin")
    refused = body(
        client.post(f"/vms/{vm.pk}/cluster/", {"action": "attach", "cluster": cluster.pk}, **HX)
    )
    nothing = client.post(f"/vms/{vm.pk}/cluster/", {"action": ""}, **HX)
    assert nothing.status_code == 422
    for answer in (refused, body(nothing)):
        assert "hx-swap-oob" not in answer
    vm.refresh_from_db()
    assert vm.cluster_id is None


# -- The VM list's rows ------------------------------------------------------------------------


def test_the_list_rows_submit_through_one_form_that_carries_the_token_and_the_way_back(
    world, login
):
    """Each row's start or stop is a button of the list's one hidden form (``form`` and
    ``formaction``): the token and the way back once, not a form per button. Without
    script, the browser posts that form to the button's action and comes back to the list."""
    stopped, running = world.vm("n-stopped"), world.vm("n-running", status=VmStatus.RUNNING)
    client = login("operator")
    page = body(client.get("/vms/"))
    rows = page.split("<tbody>")[1].split("</tbody>")[0]
    assert "csrfmiddlewaretoken" not in rows and "<form" not in rows
    assert f'form="vm-row-action" formaction="/vms/{stopped.pk}/start/"' in rows
    assert f'form="vm-row-action" formaction="/vms/{running.pk}/stop/"' in rows
    shared = re.search(r'<form id="vm-row-action" method="post" hidden>(.*?)</form>', page)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', shared.group(1))
    assert token and '<input type="hidden" name="next" value="/vms/">' in shared.group(1)
    # What the browser sends for a click on the stopped VM's 시작, without script.
    client.handler.enforce_csrf_checks = True
    response = client.post(
        f"/vms/{stopped.pk}/start/", {"csrfmiddlewaretoken": token.group(1), "next": "/vms/"}
    )
    assert response.status_code == 302 and response["Location"] == "/vms/"
    stopped.refresh_from_db()
    assert stopped.status != VmStatus.STOPPED


def test_a_reader_who_may_not_change_vms_gets_no_row_form(world, login):
    world.vm("n-stopped")
    page = body(login("viewer").get("/vms/"))
    assert 'id="vm-row-action"' not in page and "formaction" not in page
