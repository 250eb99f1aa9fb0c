"""Tenancy in the admin, and the scope every admin of project data shares.

The admin shows a staff user what the console would: the rows of their projects, gated by
the same ``restrict``/``visible_to`` querysets (superusers see all). ``ProjectScopedAdmin``
applies the gate once to the changelist, its filters, the change, delete and history pages
and the actions (all of which start from ``get_queryset``); an object out of scope is
answered like one that does not exist.
"""

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import get_fields_from_path
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from portal.api.tokens import revoke_tokens
from portal.models import ApiToken, AuditEvent, Project, Role, RoleBinding, project_permissions
from portal.permissions import ALL_PERMISSIONS, Perm

admin.site.site_header = _("GPU 클라우드 콘솔")
admin.site.site_title = _("GPU 클라우드 콘솔")
admin.site.index_title = _("관리")


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


class ProjectChoices:
    """Forms offer only the projects the staff user manages, and never the staff user
    themself as the holder of a role: nobody but a platform admin raises their own
    privileges."""

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.related_model is Project:
            kwargs["queryset"] = managed_projects(request.user)
        elif db_field.related_model is get_user_model() and not request.user.is_superuser:
            kwargs["queryset"] = get_user_model().objects.exclude(pk=request.user.pk)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ConsoleAdmin(admin.ModelAdmin):
    """Every admin of the portal, and the one place that decides who may write what.

    A model is *global* (the catalog, roles, thresholds, simulator capacity, groups: rows
    that govern every project) unless its admin says ``project_scoped = True``. Project staff
    may look at global rows; only platform admins (superusers) add, change or delete them,
    whatever model permissions a staff user has been given.

    Deleting a catalog row or a role that is still in use lists the rows using it, which may
    be any project's: a staff user is told only that it is."""

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
            protected = [_("다른 객체가 사용하고 있어 삭제할 수 없습니다.")]
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


class VisibleProjectFilter(admin.RelatedFieldListFilter):
    """A project filter on global rows (users): only the projects the staff user is in."""

    def field_choices(self, field, request, model_admin):
        return [(project.pk, str(project)) for project in visible_projects(request.user)]

    def queryset(self, request, queryset):
        """A project typed into the URL that is not the staff user's lists no one: who is in
        another project is that project's business."""
        visible = {str(pk) for pk in visible_projects(request.user).values_list("pk", flat=True)}
        if self.lookup_val and not set(self.lookup_val) <= visible:
            return queryset.none()
        return super().queryset(request, queryset)


class ProjectBindingInline(ProjectChoices, admin.TabularInline):
    """Role bindings shown and created only in the staff user's projects, never the staff
    user's own (``ProjectChoices``)."""

    model = RoleBinding
    extra = 0

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(project__in=visible_projects(request.user)).exclude(
            user=request.user
        )


class RoleForm(forms.ModelForm):
    permissions = forms.MultipleChoiceField(
        label=_("권한"),
        choices=[(p.value, p.value) for p in Perm],
        widget=forms.CheckboxSelectMultiple,
        required=False,
    )

    class Meta:
        model = Role
        fields = ["name", "description", "permissions"]


class RoleBindingInline(ProjectBindingInline):
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(ProjectScopedAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    inlines = [RoleBindingInline]

    def scope(self, queryset, user):
        return queryset.visible_to(user)

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and (
            obj is None or managed_projects(request.user).filter(pk=obj.pk).exists()
        )


@admin.register(Role)
class RoleAdmin(ConsoleAdmin):
    form = RoleForm
    list_display = ["name", "description", "permission_list"]
    search_fields = ["name"]

    @admin.display(description=_("권한"))
    def permission_list(self, role):
        return ", ".join(role.permissions)


@admin.register(RoleBinding)
class RoleBindingAdmin(ProjectScopedAdmin):
    list_display = ["user", "project", "role"]
    list_filter = ["role", "project"]
    search_fields = ["user__username", "project__name", "role__name"]
    autocomplete_fields = ["user", "project"]

    def scope(self, queryset, user):
        return queryset.filter(project__in=visible_projects(user))

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and manages(request, obj)

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and manages(request, obj)


def manages(request, binding) -> bool:
    """A binding the staff user may change: in a project they manage, and not their own."""
    return binding is None or (
        managed_projects(request.user).filter(pk=binding.project_id).exists()
        and not own(request, binding)
    )


def own(request, binding) -> bool:
    """A staff user's own role binding: theirs to look at, a platform admin's to change."""
    return (
        binding is not None
        and binding.user_id == request.user.pk
        and not (request.user.is_superuser)
    )


@admin.register(AuditEvent)
class AuditEventAdmin(ProjectScopedAdmin):
    list_display = ["at", "project", "actor", "action", "target_type", "target_name", "outcome"]
    list_filter = ["outcome", "action", "target_type", "project"]
    search_fields = ["target_name", "message", "actor__username", "request_id"]
    date_hierarchy = "at"
    list_select_related = ["project", "actor"]

    def scope(self, queryset, user):
        """The events of the projects the staff user holds a role in."""
        return queryset.filter(project__in=visible_projects(user))

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(ProjectScopedAdmin):
    """Who holds an API token and when it was last used (never the secret, nor its hash),
    with 폐기 for a token that leaked: it gets 401 at once. Tokens are issued on the API
    토큰 page (the secret is shown once there), so none is added or edited here."""

    list_display = ["name", "prefix", "user", "project", "state", "expires_at", "last_used_at"]
    list_filter = ["project"]
    search_fields = ["name", "prefix", "user__username"]
    list_select_related = ["user", "project"]
    readonly_fields = (
        "name", "prefix", "user", "project", "state", "created_at", "expires_at",
        "last_used_at", "revoked_at",
    )  # fmt: skip
    fields = readonly_fields
    actions = ["revoke"]

    def scope(self, queryset, user):
        return queryset.filter(project__in=visible_projects(user))

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # 폐기 is the way out: it is audited and the row stays to show it

    def has_change_permission(self, request, obj=None):
        """The 폐기 action on the list; a token's own page only shows it."""
        return obj is None and super().has_change_permission(request, obj)

    @admin.display(description=_("상태"))
    def state(self, token):
        labels = {"active": _("사용 가능"), "expired": _("만료됨"), "revoked": _("폐기됨")}
        return labels[token.state]

    @admin.action(description=_("선택한 API 토큰 폐기"), permissions=["change"])
    def revoke(self, request, queryset):
        queryset = queryset.filter(project__in=managed_projects(request.user))
        count = revoke_tokens(queryset, actor=request.user)
        self.message_user(request, _("API 토큰 %(n)d개를 폐기했습니다.") % {"n": count})


class UserRoleBindingInline(ProjectBindingInline):
    autocomplete_fields = ["project"]
    verbose_name_plural = _("프로젝트 역할")


User = get_user_model()
admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(Group)
class PortalGroupAdmin(GroupAdmin, ConsoleAdmin):
    """Groups carry model permissions for every project: a platform admin's."""


# What only a platform admin sees or grants on an account: each of them reaches every project.
PLATFORM_FIELDS = frozenset({"is_superuser", "is_staff", "groups", "user_permissions"})


def without_platform_fields(names):
    return [name for name in names if name not in PLATFORM_FIELDS]


@admin.register(User)
class PortalUserAdmin(UserAdmin, ConsoleAdmin):
    """Users are global (a project admin binds existing users), but a staff user changes or
    deletes only accounts wholly inside the projects they manage: one with a role elsewhere, or a
    superuser, belongs to someone else too (its password, its bindings). Their own account
    is not one of them (its privileges are a platform admin's to change), and the fields
    that grant anything beyond a project (``PLATFORM_FIELDS``) are neither shown to nor
    taken from project staff."""

    project_scoped = True  # within reach: see _within_reach
    inlines = [UserRoleBindingInline]
    list_filter = [
        *UserAdmin.list_filter,
        "role_bindings__role",
        ("role_bindings__project", VisibleProjectFilter),
    ]

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if request.user.is_superuser:
            return fieldsets
        return [
            (name, {**options, "fields": without_platform_fields(options["fields"])})
            for name, options in fieldsets
        ]

    def get_list_display(self, request):
        shown = super().get_list_display(request)
        return shown if request.user.is_superuser else without_platform_fields(shown)

    def get_list_filter(self, request):
        filters = super().get_list_filter(request)
        return filters if request.user.is_superuser else without_platform_fields(filters)

    def _within_reach(self, request, user) -> bool:
        if request.user.is_superuser or user is None:
            return True
        if user.pk == request.user.pk:
            return False
        elsewhere = user.role_bindings.exclude(project__in=managed_projects(request.user))
        return not user.is_superuser and not elsewhere.exists()

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and self._within_reach(request, obj)

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and self._within_reach(request, obj)

    def user_change_password(self, request, id, form_url=""):
        """An existing account's password is set by a platform admin or by its owner, never
        by project staff: binding a user who has no role yet and then resetting the password
        would take the account over."""
        if not request.user.is_superuser:
            raise PermissionDenied
        return super().user_change_password(request, id, form_url)
