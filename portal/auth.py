"""Answers ``user.has_perm("Resource.X.Y", obj)`` from the user's role in obj's project."""

from django.contrib.auth.backends import BaseBackend

from portal.models import Project, RoleBinding, project_permissions
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


# The admin's model permissions of project staff, before any the platform admin grants by
# hand: every portal model may be looked at (global rows read-only: portal.admin.ConsoleAdmin;
# project rows only of the staff user's projects: ProjectScopedAdmin); a project admin
# (a role holding every permission) also binds users to roles in their projects, changes the
# project and revokes its API tokens.
STAFF_APPS = ("portal", "clusters", "vms", "metrics")
PROJECT_ADMIN_PERMISSIONS = frozenset({
    "auth.view_user", "auth.change_user",
    "portal.add_rolebinding", "portal.change_rolebinding", "portal.delete_rolebinding",
    "portal.change_project", "portal.change_apitoken",
})  # fmt: skip


class ProjectStaffBackend(BaseBackend):
    """Project staff (``is_staff`` with a role in a project) can use the admin for their
    projects without model permissions granted by hand. Authenticates nobody."""

    def get_all_permissions(self, user_obj, obj=None):
        if not (user_obj.is_active and user_obj.is_staff) or user_obj.is_superuser or obj:
            return set()
        if not hasattr(user_obj, "_project_staff_perms"):
            user_obj._project_staff_perms = staff_permissions(user_obj)
        return user_obj._project_staff_perms

    def has_perm(self, user_obj, perm, obj=None):
        return perm in self.get_all_permissions(user_obj, obj)

    def has_module_perms(self, user_obj, app_label):
        return any(perm.startswith(f"{app_label}.") for perm in self.get_all_permissions(user_obj))


def staff_permissions(user) -> frozenset:
    roles = RoleBinding.objects.filter(user=user).values_list("role__permissions", flat=True)
    roles = [frozenset(permissions) for permissions in roles]
    if not roles:
        return frozenset()
    from django.contrib.auth.models import Permission

    viewing = {
        f"{app}.{codename}"
        for app, codename in Permission.objects.filter(
            content_type__app_label__in=STAFF_APPS, codename__startswith="view_"
        ).values_list("content_type__app_label", "codename")
    }
    if any(permissions >= ALL_PERMISSIONS for permissions in roles):
        return frozenset(viewing | PROJECT_ADMIN_PERMISSIONS)
    return frozenset(viewing | {"auth.view_user"})
