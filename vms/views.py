"""컴퓨트 > 가상머신: list, create, the edit page with its 클러스터 section, start/stop/delete.

Every change is a ``clusters.operations`` call, as on the API, so it leaves the same
Operation; lookups go through ``readable`` (outside it, the 404 page)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import trigger_client_event

from clusters import operations
from clusters import services as cluster_services
from clusters.models import MEMBERSHIP_OPEN, OperationItem, VirtualCluster
from metrics.storage.straggler import last_received
from portal.compute.backends import get_backend
from portal.foundation.errors import (
    InvalidInput,
    PermissionRequired,
    RuleViolation,
    VmIsMember,
    VmNotEligible,
)
from portal.iam.permissions import Perm
from portal.models import SshKey, readable
from portal.web.listing import list_page, render_list
from portal.web.rendering import (
    create_offer,
    create_view,
    delete_and_list,
    go_to,
    missing_permission,
    render_form,
)
from vms import services as vm_services
from vms.forms import VmClusterForm, VmCreateForm, VmFilterForm, VmRenameForm
from vms.host_keys import shown_host_keys
from vms.models import VM_TRANSITIONAL, VirtualMachine, VmStatus

PAGE_SIZE = 50


def _vm(request, pk):
    vms = readable(request.user, Perm.VM_READ, VirtualMachine)
    return get_object_or_404(
        vms.select_related("zone", "instance_type", "cluster", "project"), pk=pk
    )


@login_required
@require_GET
@vary_on_headers("HX-Request")
def vm_list(request):
    project = request.project
    vms = VirtualMachine.objects.none()
    clusters = None
    if project is not None:
        vms = VirtualMachine.objects.restrict(request.user, Perm.VM_READ).filter(project=project)
        clusters = (
            VirtualCluster.objects.restrict(request.user, Perm.CLUSTER_READ)
            .alive()  # walks the (project, name) index of live clusters, stops at the limit
            .filter(pk__in=vms.alive().filter(cluster__isnull=False).values("cluster_id"))
            .order_by("name")
            .values_list("pk", "name")
        )
    filters = VmFilterForm(
        request.GET,
        clusters=clusters,
        can_read_clusters=project is not None and request.user.has_perm(Perm.CLUSTER_READ, project),
    )
    if project is not None:
        vms = vms.alive()
        if q := filters.value("q"):
            vms = vms.filter(name__icontains=q)
        if status := filters.value("status"):
            vms = vms.filter(status=status)
        if zone := filters.value("zone"):
            vms = vms.filter(zone=zone)
        if instance_type := filters.value("instance_type"):
            vms = vms.filter(instance_type=instance_type)
        if cluster := filters.value("cluster"):
            vms = (
                vms.filter(cluster__isnull=True)
                if cluster == VmFilterForm.NO_CLUSTER
                else vms.filter(cluster_id=cluster)
            )
    # The shown rows with their catalog and cluster; the ids are paged over the narrow rows
    # (sorting 20,000 VMs by zone with every joined column in the sort took 3x as long).
    page = list_page(
        vms,
        filters.ordering(),
        request.GET.get("page"),
        lambda shown: shown.select_related("zone", "instance_type", "cluster"),
        PAGE_SIZE,
    )
    for vm in page.object_list:
        # The cluster's name is the cluster's: shown only to who may read clusters.
        vm.cluster_visible = request.user.has_perm(Perm.CLUSTER_READ, vm)
    return render_list(
        request,
        "vms/list.html",
        "vm-table",
        page,
        filters,
        **create_offer(request.user, project, Perm.VM_CREATE),
        can_update=project is not None and request.user.has_perm(Perm.VM_UPDATE, project),
        any_transitional=any(vm.status in VM_TRANSITIONAL for vm in page.object_list),
    )


@login_required
@require_http_methods(["GET", "POST"])
@create_view(Perm.VM_CREATE, "vms:vm_list", operations.require_create_vms)
def vm_create(request):
    project = request.project
    clusters = attachable_clusters(request.user, project)
    keys = choosable_keys(request.user, project)
    if request.method == "GET":
        form = VmCreateForm(initial=request.GET.dict() or None, clusters=clusters, ssh_keys=keys)
        if request.htmx and request.GET.get("redraw"):
            # A zone, type, billing, DR or cluster picked: the choices that depend on them.
            return render(request, "vms/create.html#create-options", {"form": form})
        return _render_create(request, form)
    form = VmCreateForm(request.POST, clusters=clusters, ssh_keys=keys)
    if form.is_valid():
        try:
            url = _create(request, project, form.cleaned_data)
        except InvalidInput as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        except PermissionRequired:
            raise  # the refusal page, as for any action the user may not take
        except RuleViolation as exc:
            # The attach rule refused the VMs before any was made (spot/DR, zone, type …):
            # said beside the cluster chosen, with the rule's own words.
            form.add_error("cluster" if form.cleaned_data.get("cluster") else None, exc.message)
        else:
            return go_to(request, url)
    return _render_create(request, form, status=422)


def _create(request, project, data) -> str:
    """Create one VM (its page next), or many and/or into a cluster as one Operation (the
    cluster's VMs next, else the list); the outcome is the next page's message."""
    fields = {
        "actor": request.user,
        "project": project,
        "name": data["name"],
        "zone_id": data["zone"].pk,
        "instance_type_id": data["instance_type"].pk,
        "billing_type": data["billing_type"],
        "disaster_recovery": data["disaster_recovery"],
    }
    cluster = data["cluster"]
    operation = operations.create_vms(
        **fields,
        count=data["count"],
        cluster_id=cluster.pk if cluster else None,
        ssh_key_ids=data["ssh_keys"],
    )
    if data["count"] == 1 and cluster is None:
        vm = operation.items.get().vm
        assert vm is not None  # noqa: S101 - the one VM just created
        messages.success(request, _("%(name)s 가상머신을 생성했습니다.") % {"name": vm.name})
        return reverse("vms:vm_edit", args=[vm.pk])
    messages.success(request, _("가상머신 %(n)d대를 생성했습니다.") % {"n": data["count"]})
    failed = operation.items.filter(status=OperationItem.Status.FAILED)
    if failed.exists():
        messages.warning(
            request,
            _("%(n)d대는 클러스터에 연결하지 못했습니다: %(message)s")
            % {"n": failed.count(), "message": failed.first().last_error.message},  # type: ignore[union-attr]
        )
    if cluster is not None:
        return reverse("clusters:cluster_members", args=[cluster.pk])
    return reverse("vms:vm_list")


def attachable_clusters(user, project):
    """The create form's 생성 후 클러스터에 연결 choices: the project's clusters the user may
    read whose membership is open (the attach still checks every rule per VM)."""
    if project is None:
        return VirtualCluster.objects.none()
    return (
        VirtualCluster.objects.restrict(user, Perm.CLUSTER_READ)
        .filter(project=project, status__in=MEMBERSHIP_OPEN)
        .order_by("name")
    )


def choosable_keys(user, project):
    """The create form's SSH 키 choices: the project's keys the user may read."""
    if project is None:
        return SshKey.objects.none()
    return SshKey.objects.restrict(user, Perm.SSH_KEY_READ).filter(project=project)


def _render_create(request, form, status=200):
    return render_form(request, "vms/create.html", "create-form", {"form": form}, status)


def eligible_clusters(user, vm):
    """Clusters this VM may be offered: readable, same project/zone/type, membership open."""
    return (
        VirtualCluster.objects.restrict(user, Perm.CLUSTER_READ)
        .filter(
            project_id=vm.project_id,
            zone_id=vm.zone_id,
            instance_type_id=vm.instance_type_id,
            status__in=MEMBERSHIP_OPEN,
        )
        .order_by("name")
    )


def _edit_context(request, vm, cluster_form=None, rename_form=None, **extra):
    can_update = request.user.has_perm(Perm.VM_UPDATE, vm)
    return {
        "vm": vm,
        "can_update": can_update,
        "can_delete": request.user.has_perm(Perm.VM_DELETE, vm),
        # Shown disabled, with why: a missing permission by name, a member's rule.
        "update_reason": "" if can_update else missing_permission(Perm.VM_UPDATE),
        "delete_reason": _delete_reason(request.user, vm),
        "cluster_form": cluster_form
        # 수행할 작업 starts at nothing: a 저장 without a choice does nothing (it asks).
        or VmClusterForm(
            clusters=eligible_clusters(request.user, vm), member=vm.cluster_id is not None
        ),
        "rename_form": rename_form or VmRenameForm(initial={"name": vm.name}),
        # Why the section's one action can't succeed now, shown before the user tries (the
        # server checks too): attach for a VM in no cluster, detach for a member.
        "obstacle": _cluster_obstacle(request.user, vm),
        "guidance": VmNotEligible().message,
        "can_read_cluster": request.user.has_perm(Perm.CLUSTER_READ, vm),
        # The keys its seed installs: the keys' readers' to see (None: not shown).
        "ssh_keys": (
            list(SshKey.objects.filter(vms=vm).order_by("name"))
            if request.user.has_perm(Perm.SSH_KEY_READ, vm)
            else None
        ),
        # A member's seed also carries its cluster's keys (the ones it has not itself).
        "cluster_ssh_keys": (
            list(SshKey.objects.filter(clusters=vm.cluster_id).exclude(vms=vm).order_by("name"))
            if vm.cluster_id is not None and request.user.has_perm(Perm.SSH_KEY_READ, vm)
            else []
        ),
        # How to connect (``ssh vc@<private IP>``) and the host keys to check it against.
        "host_keys": shown_host_keys([vm.pk]).get(vm.pk, []),
        "simulated_metrics": _simulated_metrics(vm),
        **extra,
    }


def _simulated_metrics(vm) -> dict | None:
    """A VM whose metrics the compute backend writes itself (the simulator: no agent, no
    token): when its last sample came, so the 메트릭 에이전트 panel says where they come
    from rather than that no token was issued. None elsewhere."""
    if not get_backend().emits_metrics:
        return None
    return {"last": last_received([vm.pk]), "running": vm.status == VmStatus.RUNNING}


def _delete_reason(user, vm) -> str:
    """Why 가상머신 삭제 is shown disabled: no permission, or a member (detach it first). A
    VM not stopped is refused by the server with its message, as before."""
    refusal = vm_services.preflight_delete(user, vm)
    if isinstance(refusal, PermissionRequired):
        return missing_permission(refusal.permission)
    return refusal.message if isinstance(refusal, VmIsMember) else ""


def _cluster_obstacle(user, vm) -> RuleViolation | None:
    if vm.cluster_id is None:
        return cluster_services.vm_attach_refusal(vm)
    members = cluster_services.MemberStates.read(vm.cluster)
    refusal = cluster_services.preflight_detach(user, vm, vm.cluster, members)
    return None if isinstance(refusal, PermissionRequired) else refusal


@login_required
@require_http_methods(["GET", "POST"])
def vm_edit(request, pk):
    """The VM page. POST renames (the 기본 정보 section's 저장)."""
    vm = _vm(request, pk)
    if request.method == "GET":
        return render(request, "vms/edit.html", _edit_context(request, vm))
    form = VmRenameForm(request.POST)
    saved = False
    if form.is_valid():
        try:
            operations.rename_vm_op(vm.pk, actor=request.user, name=form.cleaned_data["name"])
            saved = True
        except InvalidInput as exc:
            form.add_error("name", exc.message)
    vm = _vm(request, pk)
    context = _edit_context(request, vm, rename_form=form if not saved else None, renamed=saved)
    if request.htmx:
        return _section(request, "basics", context, saved)
    return render(request, "vms/edit.html", context, status=200 if saved else 422)


def _section(request, section, context, saved, status=422):
    """A section's answer to its 저장. Once saved, the parts of the page it changed outside
    itself come along as out-of-band swaps: the header (name, cluster, start/stop), the
    breadcrumb, the 삭제 panel (a member can't be deleted) and the title."""
    if not saved:
        return render(request, f"vms/edit.html#{section}", context, status=status)
    response = render(request, f"vms/edit.html#{section}", context)
    response.content += render_to_string("vms/edit.html#saved", context, request).encode()
    return response


@login_required
@require_POST
def vm_cluster(request, pk):
    """The 클러스터 section's 저장: attach to the chosen cluster, or detach."""
    vm = _vm(request, pk)
    form = VmClusterForm(
        request.POST, clusters=eligible_clusters(request.user, vm), member=vm.cluster_id is not None
    )
    status, done = 422, ""
    if form.is_valid():
        try:
            if form.cleaned_data["action"] == VmClusterForm.ATTACH:
                cluster = form.cleaned_data["cluster"]
                operations.attach_vm_op(vm.pk, cluster.pk, actor=request.user)
                done = _("%(cluster)s 클러스터에 연결했습니다.") % {"cluster": cluster.name}
            else:
                operations.detach_vm_op(vm.pk, actor=request.user)
                done = _("클러스터에서 분리했습니다.")
            status = 200
        except RuleViolation as exc:
            form.add_error(None, exc.message)
            status = exc.status
    if status == 200:
        vm = _vm(request, pk)
        context = _edit_context(request, vm, done=done)
    else:
        context = _edit_context(request, vm, cluster_form=form)
    if request.htmx:
        return _section(request, "cluster-section", context, status == 200, status)
    return render(request, "vms/edit.html", context, status=status)


def _vm_action(operation, done):
    """The view of a VM's start or stop: the operation, then the VM's status box (HTMX,
    with the events the lists and the cluster page refresh on and a toast saying ``done``)
    or back to where the form was (``next``, a path on this site) or the VM's page."""

    @login_required
    @require_POST
    def view(request, pk):
        vm = _vm(request, pk)
        operation(vm.pk, actor=request.user)
        if request.htmx:
            response = _render_status(request, pk)
            trigger_client_event(response, "cluster-changed")
            trigger_client_event(response, "vm-changed")
            trigger_client_event(response, "toast", {"message": done % {"name": vm.name}})
            return response
        next_url = request.POST.get("next", "")
        if next_url.startswith("/") and not next_url.startswith("//"):
            return redirect(next_url)
        return redirect("vms:vm_edit", pk=vm.pk)

    return view


vm_start = _vm_action(operations.start_vm_op, gettext_lazy("%(name)s 시작을 요청했습니다."))
vm_stop = _vm_action(operations.stop_vm_op, gettext_lazy("%(name)s 중지를 요청했습니다."))


@login_required
@require_POST
def vm_delete(request, pk):
    vm = _vm(request, pk)
    done = _("%(name)s 가상머신을 삭제했습니다.")
    return delete_and_list(request, vm, operations.delete_vm_op, done, "vms:vm_list")


@login_required
@require_GET
def vm_status(request, pk):
    return _render_status(request, pk)


def _render_status(request, pk):
    vm = _vm(request, pk)
    context = {
        "vm": vm,
        "can_update": request.user.has_perm(Perm.VM_UPDATE, vm),
        "can_read_cluster": request.user.has_perm(Perm.CLUSTER_READ, vm),
    }
    return render(request, "vms/edit.html#vm-status", context)
