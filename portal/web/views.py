"""Shell of the console: login/logout, the project switcher, health."""

from celery import current_app
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection
from django.http import HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from portal.iam import throttle
from portal.iam.projects import choose_project

# The dependencies /healthz reports without failing: the portal serves without them.
DEGRADABLE = frozenset({"cache"})


def home(request):
    return redirect("clusters:cluster_list")


class ConsoleLoginForm(AuthenticationForm):
    """Django's login form, refusing in the console's words: one sentence, no hint which of
    the two was wrong."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": gettext_lazy(
            "사용자 이름 또는 비밀번호가 올바르지 않습니다. 다시 입력하세요."
        ),
        "inactive": gettext_lazy("사용할 수 없는 계정입니다. 관리자에게 문의하세요."),
    }


class ThrottledLoginForm(ConsoleLoginForm):
    """The login form while the username or address is throttled: refuses without ever
    checking the password, so a guess made during the lockout tells the attacker nothing."""

    def clean(self):
        raise ValidationError(throttle.MESSAGE, code="throttled")


class LoginView(auth_views.LoginView):
    """Django's login (it rotates the session key), throttled per username and per address
    (``portal.iam.throttle``): while throttled the answer is 429 with the Korean message."""

    template_name = "portal/login.html"
    redirect_authenticated_user = True
    throttled = False

    def post(self, request, *args, **kwargs):
        self.throttled = throttle.blocked(request, request.POST.get("username", ""))
        return super().post(request, *args, **kwargs)

    def get_form_class(self):
        return ThrottledLoginForm if self.throttled else ConsoleLoginForm

    def form_invalid(self, form):
        if not self.throttled:
            return super().form_invalid(form)
        response = self.render_to_response(self.get_context_data(form=form), status=429)
        response["Retry-After"] = str(throttle.window_seconds())
        return response


@require_POST
def logout_view(request):
    logout(request)
    return redirect("login")


@require_POST
def switch_project(request):
    if not request.user.is_authenticated:
        return redirect("login")
    project = choose_project(request, request.POST.get("project", ""))
    if project is None:
        messages.error(request, _("선택할 수 없는 프로젝트입니다."))
    next_url = request.POST.get("next", "")
    # Only a path on this site; anything else (a view name, another host) goes to the list.
    if not next_url.startswith("/") or not url_has_allowed_host_and_scheme(
        next_url, {request.get_host()}
    ):
        next_url = reverse("clusters:cluster_list")
    return HttpResponseRedirect(next_url)


@never_cache
@require_GET
def healthz(request):
    """Liveness and readiness: the database answers, the broker can accept a message, a
    worker consumed a task within WORKER_HEARTBEAT_MAX_AGE_SECONDS
    (``portal.processes.heartbeat``), and the cache answers (``portal.iam.throttle.cache_check``).

    Each check is ``"ok"`` or ``"error: <why>"``. Any failed check but the cache's is 503 with
    ``"status": "error"``. A failed cache alone is 200 with ``"status": "degraded"``: the portal
    still serves every request (rate limits are then counted per process), so a load balancer
    keeps sending it traffic while monitoring sees the cache is lost.

    The worker check is left out in eager mode, where tasks run in the web process.
    """
    from django.conf import settings

    from portal.foundation import broker
    from portal.processes import heartbeat

    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except DatabaseError as exc:
        checks["database"] = f"error: {type(exc).__name__}"
    checks["broker"] = broker.check()
    if not current_app.conf.task_always_eager:
        bound = settings.WORKER_HEARTBEAT_MAX_AGE_SECONDS
        try:
            age = heartbeat.age()
        except broker.BROKER_ERRORS as exc:
            checks["worker"] = f"error: {type(exc).__name__}"
        else:
            if age is None:
                checks["worker"] = "error: no worker has consumed a task"
            elif age > bound:
                checks["worker"] = f"error: no task consumed for {age:.0f}s (bound {bound:g}s)"
            else:
                checks["worker"] = "ok"
    checks["cache"] = throttle.cache_check()
    failed = {name for name, value in checks.items() if value != "ok"}
    status = "error" if failed - DEGRADABLE else "degraded" if failed else "ok"
    return JsonResponse({"status": status, **checks}, status=503 if status == "error" else 200)


def csrf_failure(request, reason=""):
    """A missing or stale CSRF token: say so in the user's language, change nothing."""
    from portal.foundation.errors import RuleViolation
    from portal.web.middleware import render_refusal

    refusal = RuleViolation(
        _("보안 토큰이 없거나 만료되었습니다. 페이지를 새로 고친 뒤 다시 시도하세요.")
    )
    refusal.status = 403
    refusal.code = "csrf_failed"  # type: ignore[misc]  # this refusal's own code, no class
    return render_refusal(request, refusal)
