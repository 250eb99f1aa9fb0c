"""The 검증 section of a cluster page: start a run, follow it, read its history
and raw output; and 교체 of a member. Lookups go through ``restrict`` as everywhere (outside
it is a 404); the actions call ``clusters.operations`` and its refusals are shown in place
by the middleware."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from clusters import operations, outcome
from clusters.holds import hold_refusal
from clusters.models import ClusterStatus, Operation, ValidationJob
from clusters.validation import display, jobs
from clusters.validation.errors import NotEnoughRunningMembers
from clusters.validation.rules import preflight_validate
from clusters.views.members import answer_operation, disabled_reason, readable_cluster
from portal.foundation.kernel import parse_id
from portal.iam.permissions import Perm
from portal.models import readable
from portal.web.particles import with_particles
from vms.models import VirtualMachine, VmStatus


def _section_context(request, cluster):
    user = request.user
    open_run = jobs.open_run_of(cluster)
    if open_run is not None and jobs.settle(open_run.pk):  # a lost watcher: finish it now
        open_run = None
    running = cluster.members.filter(status=VmStatus.RUNNING).count()
    refusal = preflight_validate(user, cluster, running, open_run is not None)
    can_read_vms = user.has_perm(Perm.VM_READ, cluster)
    # Too few running members: 멤버 모두 시작 beside the reason, when stopped ones would start.
    start_all = (
        isinstance(refusal, NotEnoughRunningMembers)
        and user.has_perm(Perm.VM_UPDATE, cluster)
        and outcome.open_operation(cluster) is None
        and cluster.members.filter(status=VmStatus.STOPPED).count()
    )
    return {
        "cluster": cluster,
        # Shown to every reader; disabled, it says why (a missing permission by name).
        "show_button": cluster.status != ClusterStatus.DELETED,
        "validate_reason": disabled_reason(refusal),
        "start_all": start_all or 0,
        "polling": open_run is not None,
        # A run in progress is said as what it is (who started it, when), not as a refusal.
        "running_run": open_run.operation if open_run is not None else None,
        "history": display.run_history(cluster, user.has_perm(Perm.VM_UPDATE, cluster))
        if can_read_vms
        else [],
        "can_read_vms": can_read_vms,
    }


@login_required
@require_GET
def validation_section(request, pk):
    """The 검증 section (loaded into the 정보 tab, polled while a run is open)."""
    cluster = readable_cluster(request, pk)
    return render(request, "clusters/validation/section.html", _section_context(request, cluster))


@login_required
@require_POST
def validation_start(request, pk):
    cluster = readable_cluster(request, pk)
    operations.start_validation(cluster.pk, actor=request.user, level=request.POST.get("level", 1))
    if request.htmx:
        context = _section_context(request, readable_cluster(request, pk))
        return render(request, "clusters/validation/section.html", context)
    return redirect("clusters:cluster_detail", pk=cluster.pk)


@login_required
@require_GET
def validation_raw(request, pk):
    """A job's raw output (``?job=``), on demand, as plain text: what its figures were
    parsed from."""
    cluster = readable_cluster(request, pk)
    if not request.user.has_perm(Perm.VM_READ, cluster):
        raise Http404
    job = get_object_or_404(
        ValidationJob,
        pk=parse_id(request.GET.get("job")),
        run__operation__cluster=cluster,
        run__operation__kind=Operation.Kind.VALIDATE,
    )
    parts = [f"# {job.get_kind_display()} · {job.vm_name} · {job.get_status_display()}\n"]
    for out in job.raw:
        device = f" {out['device']}" if out.get("device") else ""
        parts.append(f"\n$ {out['tool']}{device}  (exit {out['exit_code']})\n{out['stdout']}")
    response = HttpResponse("".join(parts), content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def member_replace(request, pk):
    """교체 of ``member``: GET the spare picker (the project's eligible stopped VMs), POST
    the swap (``member`` and ``spare`` in the form; the service decides)."""
    cluster = readable_cluster(request, pk)
    if request.method == "POST":
        operation = operations.replace_member(
            cluster.pk, request.POST.get("member"), request.POST.get("spare"), actor=request.user
        )
        return answer_operation(request, operation)
    member = get_object_or_404(
        readable(request.user, Perm.VM_READ, VirtualMachine),
        pk=parse_id(request.GET.get("member")),
    )
    running, replaced = operations.replaces_of(cluster, member.pk)
    if member.cluster_id != cluster.pk and running is None:
        if replaced is None:  # never a member here, or detached: nothing to replace
            raise Http404
        # The page after its 교체: the member is gone, and the page says where it went.
        spare = replaced.items.get(position=1).target_name
        context = {"cluster": cluster, "member": member, "replaced": replaced, "spare": spare}
        return render(request, "clusters/validation/replace.html", context)
    # What refuses any 교체 of this member (the permission first) is said instead of the
    # spares: a page reached by its URL without the permission says so, not "no spare".
    # While its 교체 runs, the page says that instead.
    refusal = (
        None
        if running is not None
        else operations.preflight_member_replace(request.user, cluster, member)
    )
    eligible = (
        []
        if refusal is not None
        else [
            vm
            for vm, r in operations.attach_candidates(request.user, cluster)
            if r is None
            and hold_refusal(vm, pool=cluster) is None
            and operations.spare_refusal(vm) is None
        ]
    )
    last = display.vm_verdicts(vm.pk for vm in eligible)
    # Each spare names itself in the confirmation: "gpu-node-03을 gpu-spare-01로 교체합니다".
    confirm = gettext("%(member)s을(를) %(spare)s(으)로 교체합니다")
    spares = [
        {
            "vm": vm,
            "badge": display.verdict_badge(last.get(vm.pk)),
            "suspect": vm.pk in last and last[vm.pk].verdict in display.SUSPECT,
            "confirm": with_particles(confirm % {"member": member.name, "spare": vm.name}),
        }
        for vm in eligible
    ]
    verdict = display.latest_verdicts(cluster).get(member.pk)
    context = {
        "cluster": cluster,
        "member": member,
        "spares": spares,
        "verdict": verdict,
        "badge": display.verdict_badge(verdict),
        "running": running,
        "replace_reason": (disabled_reason(refusal) or refusal.message) if refusal else "",
    }
    return render(request, "clusters/validation/replace.html", context)
