"""The console's 웹훅 page (user menu): the current project's webhooks — create (the secret
shown once, in that answer only), list, 테스트 전송, delete — and each webhook's delivery log.

Session pages like any other: read and changed under the project's role
(``Resource.Webhook.*``), another project's webhook a 404; a button the role does not allow
is shown disabled with the reason (the services' preflights say it)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.foundation.errors import InvalidInput
from portal.iam.permissions import Perm
from portal.models import readable
from portal.webhooks import services
from portal.webhooks.models import EventType, Webhook, WebhookDelivery

LOG_ROWS = 50


def _context(request, **extra) -> dict:
    project, user = request.project, request.user
    hooks = Webhook.objects.restrict(user, Perm.WEBHOOK_READ).filter(project=project)
    refusals = {}
    if project is not None:
        probe = Webhook(project=project)
        refusals = {
            "create_reason": services.preflight_create(user, project),
            "test_reason": services.preflight_test(user, probe),
            "delete_reason": services.preflight_delete(user, probe),
        }
    return {
        "hooks": hooks.select_related("created_by") if project is not None else [],
        "event_types": EventType.choices,
        "chosen": None,  # every type ticked, until a refused form says otherwise
        **refusals,
        **extra,
    }


@never_cache  # the POST answer holds the secret: never stored by a cache
@login_required
@require_http_methods(["GET", "POST"])
def webhook_list(request):
    """The current project's webhooks; a POST creates one there (the service checks
    ``Resource.Webhook.CREATE`` and audits, whatever the form says)."""
    if request.method == "GET":
        return render(request, "webhooks/list.html", _context(request))
    if request.project is None:
        return redirect("webhooks")
    try:
        hook = services.create_webhook(
            actor=request.user,
            project=request.project,
            name=request.POST.get("name"),
            url=request.POST.get("url"),
            events=request.POST.getlist("events"),
        )
    except InvalidInput as exc:
        context = _context(
            request,
            error=exc.message,
            error_field=exc.field,
            form=request.POST,
            chosen=request.POST.getlist("events"),
        )
        return render(request, "webhooks/list.html", context, status=exc.status)
    return render(request, "webhooks/list.html", _context(request, created=hook))


@login_required
@require_POST
def webhook_delete(request, pk):
    services.delete_webhook(pk, actor=request.user)
    return redirect("webhooks")


@login_required
@require_POST
def webhook_test(request, pk):
    """테스트 전송: queued for the webhooks' worker; the log shows how it went."""
    services.send_test(pk, actor=request.user)
    return redirect("webhook_log", pk=pk)


@login_required
@require_GET
def webhook_log(request, pk):
    """The webhook's last deliveries, newest first, each with its attempts."""
    hook = readable(request.user, Perm.WEBHOOK_READ, Webhook).get_or_404(pk)
    deliveries = (
        WebhookDelivery.objects.filter(webhook=hook)
        .prefetch_related("attempt_log")
        .order_by("-created_at", "-id")[:LOG_ROWS]
    )
    context = {
        "hook": hook,
        "deliveries": deliveries,
        "test_reason": services.preflight_test(request.user, hook),
        "rows": LOG_ROWS,
    }
    return render(request, "webhooks/log.html", context)
