"""The scope every admin of the portal shares: who may see and change which rows.

The admin shows a staff user what the console would: the rows of their projects, gated by
the same ``restrict``/``visible_to`` querysets (superusers see all). ``ProjectScopedAdmin``
applies the gate once to the changelist, its filters, the change, delete and history pages
and the actions (all of which start from ``get_queryset``); an object out of scope is
answered like one that does not exist. Accounts are scoped the same way (``visible_users``):
project staff see the usernames of their projects' members, nobody else's, and get answers
only to the lookups a list offers (``portal.admin.accounts``).
"""

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.utils import get_fields_from_path
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from portal.admin.accounts import StaffSight, visible_users
from portal.iam.permissions import ALL_PERMISSIONS
from portal.models import Project, project_permissions


def visible_projects(user) -> QuerySet:
    return Project.objects.visible_to(user)


def managed_projects(user) -> QuerySet:
    """The projects whose rows a staff user may change: where their role holds every
    permission (a project admin); superusers: all. In their other projects they only look:
    the model permissions a project admin gets name kinds of rows, not projects."""
    if user.is_superuser:
        return Project.objects.all()
    managed = [pid for pid, perms in project_permissions(user).items() if perms >= ALL_PERMISSIONS]
    return Project.objects.filter(pk__in=managed)


if TYPE_CHECKING:  # what ProjectChoices is mixed into: an admin or an inline
    from django.contrib.admin.options import BaseModelAdmin

    _BaseAdmin = BaseModelAdmin[Any]
else:
    _BaseAdmin = object


class ProjectChoices(_BaseAdmin):
    """Forms offer only the projects the staff user manages, only accounts they may see
    (``visible_users``), and never the staff user themself as the holder of a role: nobody
    but a platform admin raises their own privileges."""

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.related_model is Project:
            kwargs["queryset"] = managed_projects(request.user)
        elif db_field.related_model is get_user_model() and not request.user.is_superuser:
            kwargs["queryset"] = visible_users(request.user).exclude(pk=request.user.pk)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class MadeElsewhere:
    """Rows the console, the services or a worker make: an admin (or inline) shows them and
    never adds or edits one by hand."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ReadOnly(MadeElsewhere):
    """Records kept by the code that writes them: never deleted by hand either."""

    def has_delete_permission(self, request, obj=None):
        return False


class ConsoleAdmin(StaffSight, admin.ModelAdmin):
    """Every admin of the portal, and the one place that decides who may write what.

    A model is *global* (the catalog, roles, thresholds, simulator capacity, groups: rows
    that govern every project) unless its admin says ``project_scoped = True``. Project staff
    may look at global rows; only platform admins (superusers) add, change or delete them,
    whatever model permissions a staff user has been given.

    Deleting a catalog row or a role that is still in use lists the rows using it, which may
    be any project's: a staff user is told only that it is. What staff see of accounts, and
    which lookups a list answers them, is ``StaffSight``'s."""

    project_scoped = False
    # Rows only a platform admin may even see (GPU hosts: the machines under every project).
    platform_only = False

    def writable_by(self, user) -> bool:
        return (self.project_scoped and not self.platform_only) or user.is_superuser

    def has_module_permission(self, request):
        if self.platform_only and not request.user.is_superuser:
            return False
        return super().has_module_permission(request)

    def has_view_permission(self, request, obj=None):
        if self.platform_only and not request.user.is_superuser:
            return False
        return super().has_view_permission(request, obj)

    def has_add_permission(self, request, *args):
        return self.writable_by(request.user) and super().has_add_permission(request, *args)

    def has_change_permission(self, request, obj=None):
        return self.writable_by(request.user) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return self.writable_by(request.user) and super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        if protected and not request.user.is_superuser:
            protected = [str(_("다른 객체가 사용하고 있어 삭제할 수 없습니다."))]
        return deleted, counts, perms_needed, protected


class ProjectScopedAdmin(ProjectChoices, ConsoleAdmin):
    """An admin of project data: subclasses say how a queryset of their model is narrowed to
    what ``user`` may see (``scope``); the filters then offer only values of visible rows.

    A delete elsewhere that would cascade to a row out of scope is refused (Django asks
    ``has_delete_permission`` of every row a delete collects)."""

    project_scoped = True

    def scope(self, queryset: QuerySet, user) -> QuerySet:
        raise NotImplementedError

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        return queryset if request.user.is_superuser else self.scope(queryset, request.user)

    def has_delete_permission(self, request, obj=None):
        if not super().has_delete_permission(request, obj):
            return False
        return obj is None or self.get_queryset(request).filter(pk=obj.pk).exists()

    def get_list_filter(self, request):
        """A filter on a relation lists only the related objects of rows in scope (a plain
        one would list every project, cluster… in the database)."""
        return [
            (entry, admin.RelatedOnlyFieldListFilter)
            if isinstance(entry, str) and get_fields_from_path(self.model, entry)[-1].is_relation
            else entry
            for entry in super().get_list_filter(request)
        ]
