"""Which project the console is looking at: the switcher's choice, kept in the session (its
id only: the projects themselves come with the user, ``portal.iam.auth.SessionUserBackend``)."""

from portal.models import Project

SESSION_KEY = "project_id"


def visible_projects(request):
    """The projects the switcher lists: read with the session's user (no query of their
    own), or, for a user loaded some other way, here."""
    if not hasattr(request, "_visible_projects"):
        user = request.user
        loaded = getattr(user, "_visible_projects", None)
        request._visible_projects = (
            loaded if loaded is not None else list(Project.objects.visible_to(user))
        )
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
