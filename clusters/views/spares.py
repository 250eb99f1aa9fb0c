"""The members tab's 예비 가상머신 section: the cluster's 교체 정책 and its spares, with the
controls to change them — offered, or shown disabled with why (a viewer: "권한 없음: …").
Every change is a ``clusters.operations`` call; its refusal is shown in place by the
middleware."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from clusters import operations, policy, spares
from clusters.models import ReplacePolicy
from clusters.operations import heal
from clusters.validation import display
from clusters.views.members import disabled_reason, readable_cluster
from portal.iam.permissions import Perm


def spares_context(user, cluster) -> dict:
    """What the section shows ``user``: the policy and who set it, the spares with their
    last verdict and why each may not be removed, the VMs that could be added."""
    can_read_vms = user.has_perm(Perm.VM_READ, cluster)
    kept = spares.spares_of(cluster) if can_read_vms else []
    verdicts = display.vm_verdicts(vm.pk for vm in kept)
    add_refusal = spares.preflight_add_spare(user, cluster)
    proposals = [
        {
            **found,
            "reason": disabled_reason(
                operations.preflight_replace(user, cluster, found["member"], found["spare"])
            ),
        }
        for found in (heal.proposal(cluster) if can_read_vms else [])
    ]
    candidates = spares.spare_candidates(user, cluster) if add_refusal is None else []
    return {
        "cluster": cluster,
        "policy_choices": ReplacePolicy.choices,
        "policy_reason": disabled_reason(policy.preflight_policy(user, cluster)),
        "spare_rows": [
            {
                "vm": vm,
                "badge": display.verdict_badge(verdicts.get(vm.pk)),
                "remove_reason": disabled_reason(spares.preflight_remove_spare(user, cluster, vm)),
            }
            for vm in kept
        ],
        "add_reason": disabled_reason(add_refusal),
        "candidates": candidates,
        "can_read_vms": can_read_vms,
        "proposals": proposals,
    }


def _answer(request, cluster):
    if request.htmx:
        return render(
            request,
            "clusters/_spares.html",
            spares_context(request.user, readable_cluster(request, cluster.pk)),
        )
    return redirect("clusters:cluster_members", pk=cluster.pk)


@login_required
@require_GET
def spares_section(request, pk):
    cluster = readable_cluster(request, pk)
    return render(request, "clusters/_spares.html", spares_context(request.user, cluster))


def _change(run):
    """A POST of the section: ``run(request, cluster)`` calls one operation, then the
    section is drawn again (or the members tab, without HTMX)."""

    @login_required
    @require_POST
    def view(request, pk):
        cluster = readable_cluster(request, pk)
        run(request, cluster)
        return _answer(request, cluster)

    return view


spare_add = _change(
    lambda request, cluster: operations.spare_add_op(
        cluster.pk, request.POST.get("vm"), actor=request.user
    )
)
spare_remove = _change(
    lambda request, cluster: operations.spare_remove_op(
        cluster.pk, request.POST.get("vm"), actor=request.user
    )
)
cluster_policy = _change(
    lambda request, cluster: operations.policy_op(
        cluster.pk, actor=request.user, policy=request.POST.get("policy")
    )
)
