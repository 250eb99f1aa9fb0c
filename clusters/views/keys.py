"""SSH 키 변경 on a cluster's 정보 tab: the console's change is the API's (PATCH
/virtual-clusters/{id} with ``ssh_key_ids``). Both call
``clusters.operations.cluster_ssh_keys_op``, so the rule, the messages, the Operation and the
audit event are one and the same.

A key not found (another project's, a deleted one) stays in the form with its message and
nothing changes; a missing permission is the middleware's refusal, as everywhere.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from clusters import operations
from clusters.forms import ClusterSshKeysForm
from clusters.views.clusters import choosable_keys, detail_context, keys_context
from clusters.views.members import readable_cluster
from portal.foundation.errors import PermissionRequired, RuleViolation


@login_required
@require_POST
def cluster_ssh_keys(request, pk):
    cluster = readable_cluster(request, pk)
    ids = request.POST.getlist("ssh_keys")
    try:
        operations.cluster_ssh_keys_op(cluster.pk, actor=request.user, ssh_key_ids=ids)
    except PermissionRequired:
        raise
    except RuleViolation as exc:
        form = ClusterSshKeysForm(
            request.POST, ssh_keys=choosable_keys(request.user, cluster.project_id)
        )
        form.is_valid()
        form.add_error("ssh_keys", exc.message)
        if not request.htmx:
            context = detail_context(request, cluster, "info")
            context.update(keys_context(request.user, cluster, form))
            return render(request, "clusters/detail.html", context, status=exc.status)
        context = {"cluster": cluster, **keys_context(request.user, cluster, form)}
        return render(request, "clusters/detail.html#ssh-keys", context, status=exc.status)
    done = _("클러스터의 SSH 키를 바꿨습니다. 각 멤버가 다음에 시작할 때 적용됩니다.")
    if not request.htmx:
        messages.success(request, done)
        return redirect("clusters:cluster_detail", pk=cluster.pk)
    context = {"cluster": cluster, **keys_context(request.user, cluster)}
    response = render(request, "clusters/detail.html#ssh-keys", context)
    trigger_client_event(response, "toast", {"message": done})
    return response
