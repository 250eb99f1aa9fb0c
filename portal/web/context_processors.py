from django.conf import settings

from portal.iam.projects import visible_projects


def console(request):
    user = getattr(request, "user", None)
    return {
        "csp_nonce": getattr(request, "csp_nonce", ""),
        "projects": visible_projects(request) if user and user.is_authenticated else [],
        "current_project": getattr(request, "project", None),
        "LANGUAGE_COOKIE": settings.LANGUAGE_COOKIE_NAME,
    }
