"""The cluster page as the place a cluster is run: attach many VMs, detach one,
start or stop many members, stop the cluster with its members, and follow each of these as
one ``Operation`` whose progress card polls itself until it is done.

Every action goes through ``clusters.operations``, which runs each target through the
single-VM service (its rules, permission and audit); these views only read the request,
call it and show the Operation. What a button may do and why not comes from the services'
preflights, never from a rule written here.
"""

from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling, trigger_client_event

from clusters import operations, outcome
from clusters.models import ClusterStatus, OperationItem, VirtualCluster
from clusters.services import MemberStates, detach_refusal, membership_refusal
from clusters.validation import display
from portal.foundation.errors import (
    InvalidInput,
    InvalidTransition,
    MembersStillRunning,
    PermissionRequired,
    VmNotEligible,
    VmNotStopped,
)
from portal.foundation.event_text import NOT_STOPPED_REASON, STOPPING_REASON
from portal.foundation.kernel import check_perm
from portal.iam.permissions import Perm
from portal.models import readable_row
from portal.web.rendering import missing_permission
from vms import services as vm_services
from vms.models import VirtualMachine, VmStatus

# How many failed items a progress card and an activity row list (the rest are counted).
FAILURES_SHOWN = 20
OPERATIONS_SHOWN = 20


def readable_cluster(request, pk):
    """Cluster ``pk`` if the user may read it, else the 404 page (every cluster page starts
    here)."""
    cluster = readable_row(request.user, Perm.CLUSTER_READ, VirtualCluster, pk, _page_cluster)
    if cluster is None:
        raise Http404
    return cluster


def _page_cluster(clusters):
    """What a cluster page shows of it: its catalog, project and creator, whether an
    operation runs on it, and its last 검증 (whose verdicts the member rows show)."""
    clusters = clusters.select_related("zone", "instance_type", "project", "created_by")
    return display.with_last_validation(outcome.with_open_operation(clusters))


# ---------------------------------------------------------------------------------------------
# What the header and the Connected VMs tab offer


def _stopped_member_probe(cluster) -> VirtualMachine:
    """An unsaved stopped member of ``cluster``: what the start preflight is asked about when
    the page has only the members' counts (the header), not the rows."""
    return VirtualMachine(
        project_id=cluster.project_id, cluster_id=cluster.pk, status=VmStatus.STOPPED
    )


def member_summary(user, cluster, members: MemberStates, stop_refusal) -> dict:
    """The header's 실행중 멤버 n/m, its callouts and the stop form's checkbox.

    Member statuses are shown only to a user who may read the VMs (the fingerprint hides
    them from the others too). 멤버 모두 시작 is offered when a stopped member would start
    now (asked of the start preflight); 가상머신 연결 on an empty cluster to who may update VMs;
    멤버 가상머신도 함께 중지 when the plain stop is refused because members run
    (``stop_refusal``, the stop preflight's answer).
    """
    if not user.has_perm(Perm.VM_READ, cluster):
        return {"visible": False}
    counts = members.by_status
    stopped = counts[VmStatus.STOPPED]
    can_update_vm = user.has_perm(Perm.VM_UPDATE, cluster)
    start_all = (
        stopped > 0
        and vm_services.preflight_start(user, _stopped_member_probe(cluster), cluster) is None
    )
    return {
        "visible": True,
        "running": counts[VmStatus.RUNNING],
        "total": members.count,
        "stopped": stopped,
        "offer_start_all": start_all,
        "offer_attach": members.count == 0
        and can_update_vm
        and cluster.status != ClusterStatus.DELETED,
        "offer_stop_members": isinstance(stop_refusal, MembersStillRunning) and can_update_vm,
    }


def disabled_reason(refusal) -> str:
    """What a control shown disabled says: a missing permission by name ("권한 없음:
    Resource.VirtualCluster.UPDATE"), else ``shown_reason``. For the controls a page shows
    to everyone who reads it, so a viewer sees what exists and why it is not theirs."""
    if isinstance(refusal, PermissionRequired):
        return missing_permission(refusal.permission)
    return shown_reason(refusal)


def shown_reason(refusal) -> str:
    """What a disabled control says: the rule's message. A missing permission or a status
    the action does not start from hides the control instead, so neither is a reason."""
    if refusal is None or isinstance(refusal, PermissionRequired | InvalidTransition):
        return ""
    return refusal.message


def member_controls(user, cluster, members: list) -> dict:
    """Per member: may it start, stop, be detached now; and for the tab's toolbar, which bulk
    buttons to offer, or the reason start is not offered.

    The permission is the project's, the same for every member: asked once. The three rules
    read nothing of a member but its status (``test_member_controls`` holds them to it), so each
    status present is asked of its first member and the answers hold for every member in
    it: asking each member was a twentieth of the tab's time at 256 members."""
    can_update_vm = user.has_perm(Perm.VM_UPDATE, cluster)
    controls = {
        "startable": set(),
        "stoppable": set(),
        "detach": {},
        "start_reason": "",
        "detach_reasons": [],
        "can_update_vm": can_update_vm,
        # 가상머신 연결 is shown on every cluster not deleted; disabled, it says why.
        "offer_attach": cluster.status != ClusterStatus.DELETED,
        "attach_reason": "",
        "update_reason": "",
    }
    if not can_update_vm:
        controls["update_reason"] = disabled_reason(PermissionRequired(Perm.VM_UPDATE))
        return controls
    controls["attach_reason"] = shown_reason(membership_refusal(cluster))
    states = MemberStates.of(vm.status for vm in members)
    by_status: dict[str, list] = {}
    for vm in members:
        by_status.setdefault(vm.status, []).append(vm)
    start_reason = ""
    for group in by_status.values():
        probe, pks = group[0], [vm.pk for vm in group]
        refusal = vm_services.start_refusal(probe, cluster)
        if refusal is None:
            controls["startable"].update(pks)
        elif not start_reason:
            start_reason = shown_reason(refusal)
        if vm_services.stop_refusal(probe) is None:
            controls["stoppable"].update(pks)
        refusal = detach_refusal(probe, cluster, states)
        if refusal is None:
            controls["detach"].update(dict.fromkeys(pks, ""))
        elif not isinstance(refusal, VmNotStopped | InvalidTransition):
            # Shown disabled, with the rule's message.
            controls["detach"].update(dict.fromkeys(pks, refusal.message))
    controls["start_reason"] = "" if controls["startable"] else start_reason
    # Each reason a disabled 분리 has, said once above the table (rows point at it).
    controls["detach_reasons"] = list(dict.fromkeys(r for r in controls["detach"].values() if r))
    return controls


def cluster_operations(user, cluster) -> list:
    """The cluster's latest Operations for the 활동 tab with their outcomes, counted in the
    query; the failed items only for a user who may read the VMs they name."""
    ops = (
        operations.visible_operations(user)
        .filter(cluster=cluster)
        .select_related("actor")
        .annotate(**outcome.item_counts("items__"))
    )
    if user.has_perm(Perm.VM_READ, cluster):
        failed = OperationItem.objects.filter(status=OperationItem.Status.FAILED)
        ops = ops.prefetch_related(Prefetch("items", queryset=failed, to_attr="failures"))
    return [
        {"op": op, "outcome": outcome.of(op)}
        for op in ops.order_by("-created_at", "-id")[:OPERATIONS_SHOWN]
    ]


# ---------------------------------------------------------------------------------------------
# The Operation's progress card


def _operation_context(request, operation) -> dict:
    counts = operation.items.aggregate(**outcome.item_counts())
    failures = []
    if counts["n_failed"] and request.user.has_perm(Perm.VM_READ, operation.project):
        failures = list(
            operation.items.filter(status=OperationItem.Status.FAILED).order_by("position")[
                :FAILURES_SHOWN
            ]
        )
    # The cluster's name is cluster data: a VM-only role sees its VM operation without it.
    show_cluster = operation.cluster_id is not None and request.user.has_perm(
        Perm.CLUSTER_READ, operation.project
    )
    cancellable = not operation.done and operation.kind in operations.cancel.PERMISSION
    return {
        "op": operation,
        "counts": counts,
        "outcome": outcome.describe(operation, **counts),
        "doing": outcome.doing(operation, counts),
        "failures": failures,
        "show_cluster": show_cluster,
        "cancellable": cancellable,
        "cancel_reason": disabled_reason(operations.preflight_cancel(request.user, operation))
        if cancellable
        else "",
        "acted_under": outcome.acted_under(operation)
        if request.user.has_perm(Perm.VM_READ, operation.project)
        else "",
    }


def _summary(context) -> str:
    """The toast of a finished Operation: what, its outcome in the card's words, and the
    first failure's message (a row's 분리 has only that one)."""
    operation, result = context["op"], context["outcome"]
    if operation.last_error is not None:
        return f"{operation.kind_label}: {result.text} — {operation.last_error.message}"
    text = f"{operation.kind_label}: {result.text}"
    if context["failures"]:
        first = context["failures"][0]
        text += f" — {first.target_name}: {first.last_error.message}"
    return text


def _tell(response, event: str, **detail) -> None:
    """An HX-Trigger event dispatched on <body>: the element that sent the request may be
    gone by the time the answer comes (a row's form, when the tab refreshed meanwhile), and
    an event on a detached element reaches no listener."""
    trigger_client_event(response, event, {"target": "body", **detail})


def render_operation(request, operation) -> HttpResponse:
    """The progress card (HTMX) or its page; a finished one tells the page to refresh and
    says how it went in a toast."""
    context = _operation_context(request, operation)
    if not request.htmx:
        return render(request, "clusters/operation.html", context)
    response = render(request, "clusters/_operation.html", context)
    if operation.done:
        _tell(response, "cluster-changed")
        _tell(response, "toast", message=_summary(context))
    return response


@login_required
@require_GET
def operation_detail(request, pk):
    """One Operation's progress, polled by its card every second until it is done (then 286
    stops the polling); as a page without HTMX."""
    operation = get_object_or_404(
        operations.visible_operations(request.user).select_related("cluster", "project"), pk=pk
    )
    response = render_operation(request, operation)
    if request.htmx and operation.done:
        response.status_code = HttpResponseStopPolling.status_code
    return response


def answer_operation(request, operation) -> HttpResponse:
    """A bulk action's answer: its card for the page (swapped in at the top of
    ``#operations``), or the Operation's page."""
    if not request.htmx:
        return redirect("clusters:operation_detail", pk=operation.pk)
    response = render_operation(request, operation)
    # Wherever the form sits (the header's stop form swaps the header), the card goes on top.
    response["HX-Retarget"] = "#operations"
    response["HX-Reswap"] = "afterbegin"
    _tell(response, "close-dialogs")
    if not operation.done:
        _tell(response, "cluster-changed")  # the first statuses have moved
    return response


def _selected_vm_ids(request) -> list[str] | None:
    """The checked ``vm`` boxes as sent (the operation refuses the whole request if one is
    not an id); None when none were sent: all of them, for the bulk start and stop."""
    return request.POST.getlist("vm") or None


# ---------------------------------------------------------------------------------------------
# The actions


def _attach_reason(vm, refusal) -> str:
    """What the 가상머신 연결 dialog says beside a VM it cannot attach, naming the fact: its
    other zone or instance type, its status (실행중 — 먼저 중지하세요), or the rule's words."""
    if type(refusal) is VmNotEligible:  # the plain rule 1: only "not stopped" is left
        text = STOPPING_REASON if vm.status == VmStatus.STOPPING else NOT_STOPPED_REASON
        return text % {"status": vm.get_status_display()}
    return refusal.short


def _attach_context(request, cluster, error=""):
    candidates = operations.attach_candidates(request.user, cluster)
    rows = [
        {
            "vm": vm,
            "where": f"{vm.zone.code} · {vm.instance_type.code}",
            "reason": _attach_reason(vm, refusal) if refusal is not None else "",
            # "already in a cluster" names it, to who may read it.
            "in_cluster": vm.cluster.name
            if refusal is not None
            and vm.cluster_id
            and request.user.has_perm(Perm.CLUSTER_READ, vm.cluster)
            else "",
        }
        for vm, refusal in candidates
    ]
    return {
        "cluster": cluster,
        "rows": rows,
        "eligible": sum(1 for row in rows if not row["reason"]),
        "error": error,
        "guidance": VmNotEligible().message,  # the seed's guidance line is rule 1's message
    }


@login_required
@require_http_methods(["GET", "POST"])
def cluster_attach(request, pk):
    """GET: the 가상머신 연결 panel. POST: attach the checked VMs as one Operation."""
    cluster = readable_cluster(request, pk)
    template = "clusters/_attach_panel.html" if request.htmx else "clusters/attach.html"
    if request.method == "GET":
        check_perm(request.user, Perm.VM_UPDATE, cluster)
        return render(request, template, _attach_context(request, cluster))
    try:
        operation = operations.attach_many(
            cluster.pk, _selected_vm_ids(request), actor=request.user
        )
    except InvalidInput as exc:  # nothing checked, or a value that names no VM
        context = _attach_context(request, cluster, exc.message)
        response = render(request, template, context, status=exc.status)
        if request.htmx:
            response["HX-Retarget"] = "#attach-dialog"
            response["HX-Reswap"] = "innerHTML"
        return response
    return answer_operation(request, operation)


@login_required
@require_POST
def cluster_detach(request, pk):
    """A member row's 분리: one VM, through the same rule as the VM page's."""
    cluster = readable_cluster(request, pk)
    operation = operations.detach_many(cluster.pk, _selected_vm_ids(request), actor=request.user)
    if not request.htmx:
        return redirect("clusters:operation_detail", pk=operation.pk)
    # One row: no card, the outcome in a toast; the tab refreshes on cluster-changed.
    context = _operation_context(request, operation)
    response = HttpResponse(status=204)
    _tell(response, "cluster-changed")
    _tell(response, "toast", message=_summary(context))
    return response


def _members_action(operation, doc: str):
    """A view that runs ``operation`` on the cluster's members: all of them (no ``vm``) or
    the checked ones, as one Operation."""

    @login_required
    @require_POST
    def view(request, pk):
        cluster = readable_cluster(request, pk)
        return answer_operation(
            request, operation(cluster.pk, actor=request.user, vm_ids=_selected_vm_ids(request))
        )

    view.__doc__ = doc
    return view


cluster_start_members = _members_action(
    operations.start_members, "멤버 모두 시작 / 선택한 멤버 시작"
)
cluster_stop_members = _members_action(operations.stop_members, "멤버 모두 중지 / 선택한 멤버 중지")


def stop_with_members(request, pk) -> HttpResponse:
    """The 클러스터 중지 form with 멤버 가상머신도 함께 중지 checked: running members first,
    then the cluster, as one Operation (``clusters.views.clusters.cluster_stop`` hands over)."""
    cluster = readable_cluster(request, pk)
    operation = operations.stop_cluster_with_members(cluster.pk, actor=request.user)
    return answer_operation(request, operation)


@login_required
@require_POST
def operation_cancel(request, pk):
    """취소 on a progress card: the operation's own rule (``cancel_operation``)."""
    rows = operations.visible_operations(request.user).select_related("cluster", "project")
    operations.cancel_operation(get_object_or_404(rows, pk=pk).pk, actor=request.user)
    return render_operation(request, rows.get(pk=pk))
