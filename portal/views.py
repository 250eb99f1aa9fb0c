"""Shell of the console: login/logout, the project switcher, health."""

from django.contrib import messages
from kombu.exceptions import OperationalError as KombuOperationalError
from django.contrib.auth import logout
from django.contrib.auth import views as auth_views
from django.db import DatabaseError, connection
from django.http import JsonResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from portal.projects import choose_project


def home(request):
    return redirect("clusters:cluster_list")


class LoginView(auth_views.LoginView):
    template_name = "portal/login.html"
    redirect_authenticated_user = True


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
    if not url_has_allowed_host_and_scheme(next_url, {request.get_host()}):
        next_url = "clusters:cluster_list"
    return redirect(next_url)


@never_cache
@require_GET
def healthz(request):
    """Liveness and readiness: the database answers and the broker accepts a connection."""
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except DatabaseError as exc:
        checks["database"] = f"error: {type(exc).__name__}"
    from portal.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except (OSError, KombuOperationalError) as exc:
        checks["broker"] = f"error: {type(exc).__name__}"
    healthy = all(v == "ok" for v in checks.values())
    status = 200 if healthy else 503
    return JsonResponse({"status": "ok" if healthy else "error", **checks}, status=status)
