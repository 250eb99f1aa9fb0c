"""이름 변경 on a cluster's 정보 tab: the console's rename is the API's (PATCH
/virtual-clusters/{id}). Both call ``clusters.operations.rename_cluster_op``, so the name rule,
the messages, the Operation and the audit event are one and the same.

A refusal of the name (empty, too long, invalid, taken, a deleted cluster) stays in the form
with the rule's message; a missing permission is the middleware's refusal, as everywhere.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from clusters import operations
from clusters.views.clusters import detail_context
from clusters.views.members import readable_cluster
from portal.foundation.errors import PermissionRequired, RuleViolation


@login_required
@require_POST
def cluster_rename(request, pk):
    cluster = readable_cluster(request, pk)
    name = request.POST.get("name", "")
    try:
        _operation, cluster = operations.rename_cluster_op(
            cluster.pk, actor=request.user, name=name
        )
    except PermissionRequired:
        raise
    except RuleViolation as exc:
        context = detail_context(request, cluster, "info")
        context.update(rename_error=exc.message, rename_value=name)
        template = "clusters/detail.html#rename" if request.htmx else "clusters/detail.html"
        return render(request, template, context, status=exc.status)
    done = _("클러스터 이름을 바꿨습니다: %(name)s") % {"name": cluster.name}
    if not request.htmx:
        messages.success(request, done)
        return redirect("clusters:cluster_detail", pk=cluster.pk)
    cluster = readable_cluster(request, cluster.pk)
    response = render(request, "clusters/detail.html#renamed", {"cluster": cluster})
    # The header and the tab show the name: they refresh on cluster-changed.
    trigger_client_event(response, "cluster-changed")
    trigger_client_event(response, "toast", {"message": done})
    return response
