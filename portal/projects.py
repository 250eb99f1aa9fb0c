"""Which project the console is looking at: the switcher's choice, kept in the session."""

from portal.models import Project

SESSION_KEY = "project_id"


def visible_projects(request):
    if not hasattr(request, "_visible_projects"):
        request._visible_projects = list(Project.objects.visible_to(request.user))
    return request._visible_projects


def current_project(request):
    if not request.user.is_authenticated:
        return None
    projects = visible_projects(request)
    chosen = request.session.get(SESSION_KEY)
    for project in projects:
        if project.pk == chosen:
            return project
    return projects[0] if projects else None


def choose_project(request, project_id):
    """Remember ``project_id`` if the user may see it; return the project or None."""
    for project in visible_projects(request):
        if str(project.pk) == str(project_id):
            request.session[SESSION_KEY] = project.pk
            return project
    return None
