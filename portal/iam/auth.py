"""Answers ``user.has_perm("Resource.X.Y", obj)`` from the user's role in obj's project, and
loads a session's user together with those roles.

A request's user, their role in every project and the projects the switcher lists arrive in
one query (``SessionUserBackend.get_user``): the roles are read from the database on every
request, in the query that reads the user anyway, so nothing holds a grant between requests
and nothing has to be told when one changes — a binding deleted in the admin, a role edited
by a queryset ``update()`` or by hand in SQL, a project deleted, a user deactivated: the
very next request sees it. The session keeps only which project was chosen (an id, checked
against the projects read with the user).
"""

from datetime import datetime
from functools import cache

import orjson
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import BaseBackend, ModelBackend
from django.db import connection
from django.db.models import TextField
from django.db.models.expressions import RawSQL

from portal.iam.permissions import ALL_PERMISSIONS
from portal.models import Project, Role, RoleBinding, project_permissions

# The annotation carrying the grants on the user's row.
GRANTS = "console_grants"


@cache
def grants_sql() -> RawSQL:
    """The user's projects as a JSON array of ``[id, slug, name, created_at, permissions]``
    in the switcher's order (name, then id): the projects they hold a role in, with the
    role's permissions; for a superuser every project, ``permissions`` null where they hold
    no role. One correlated subquery on the user's row, as
    SQL (compiled once), so it costs no query of its own (one annotation: each more costs the
    ORM time on every request); the superuser's branch runs for superusers only."""
    user = get_user_model()._meta.db_table
    project, binding, role = (m._meta.db_table for m in (Project, RoleBinding, Role))
    row = "json_build_array(p.id, p.slug, p.name, p.created_at, r.permissions)"
    ordered = f"coalesce(json_agg({row} ORDER BY p.name, p.id), '[]')"
    bound = (
        f"SELECT {ordered} FROM {binding} b JOIN {project} p ON p.id = b.project_id "  # noqa: S608 - names from the models and constants; values are parameters
        f"JOIN {role} r ON r.id = b.role_id WHERE b.user_id = {user}.id"
    )
    every = (
        f"SELECT {ordered} FROM {project} p LEFT JOIN {binding} b ON b.project_id = p.id "  # noqa: S608 - names from the models and constants; values are parameters
        f"AND b.user_id = {user}.id LEFT JOIN {role} r ON r.id = b.role_id"
    )
    sql = f"(CASE WHEN {user}.is_superuser THEN ({every}) ELSE ({bound}) END)::text"
    return RawSQL(sql, (), output_field=TextField())  # noqa: S611 - names from the models; values are parameters


def attach_grants(user, grants: str) -> None:
    """Give ``user`` what ``project_permissions`` and ``visible_projects`` would read: the
    permissions per project of their roles, and the projects they may see."""
    fields = [f.attname for f in Project._meta.concrete_fields]
    permissions, projects = {}, []
    bound = orjson.loads(grants)
    for pk, slug, name, created_at, perms in bound:
        values = {"id": pk, "slug": slug, "name": name, "created_at": _moment(created_at)}
        projects.append(Project.from_db("default", fields, [values[f] for f in fields]))
        if perms is not None:
            permissions[pk] = frozenset(perms)
    user._project_permissions = permissions
    user._visible_projects = projects


def _moment(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


class SessionUserBackend(ModelBackend):
    """Django's ModelBackend whose session user comes with their grants (``grants_sql``):
    the user's row and their roles in one query, read afresh on every request."""

    def get_user(self, user_id):
        if connection.vendor != "postgresql":
            # The demo's embedded SQLite has no json_agg(... ORDER BY): the roles and the
            # projects are read when first asked (``project_permissions``, ``visible_projects``).
            return super().get_user(user_id)
        users = get_user_model()._default_manager.annotate(**{GRANTS: grants_sql()})
        user = users.filter(pk=user_id).first()
        if user is None or not self.user_can_authenticate(user):
            return None
        attach_grants(user, getattr(user, GRANTS))
        return user


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
STAFF_APPS = ("portal", "catalog", "compute", "clusters", "vms", "metrics")
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
    bound = RoleBinding.objects.filter(user=user).values_list("role__permissions", flat=True)
    roles = [frozenset(permissions) for permissions in bound]
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
