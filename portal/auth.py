"""Answers ``user.has_perm("Resource.X.Y", obj)`` from the user's role in obj's project."""

from django.contrib.auth.backends import BaseBackend

from portal.models import Project, project_permissions
from portal.permissions import ALL_PERMISSIONS


def project_id_of(obj):
    if isinstance(obj, Project):
        return obj.pk
    return getattr(obj, "project_id", None)


class ProjectRoleBackend(BaseBackend):
    """Project-scoped permissions. Authenticates nobody; only answers permission questions."""

    def has_perm(self, user_obj, perm, obj=None):
        if perm not in ALL_PERMISSIONS or obj is None:
            return False
        if not user_obj.is_active:
            return False
        if user_obj.is_superuser:
            return True
        project_id = project_id_of(obj)
        return project_id is not None and perm in project_permissions(user_obj).get(project_id, ())
