"""Tenancy in the admin: projects, roles and their bindings, the audit log, API tokens and
the accounts, each scoped by ``portal.admin.scope`` (where the other apps' admins take their
base classes from, through this module)."""

from django import forms
from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Q
from django.utils.translation import gettext_lazy as _

from portal.admin.scope import (
    ConsoleAdmin,
    MadeElsewhere,
    ProjectChoices,
    ProjectScopedAdmin,
    ReadOnly,
    managed_projects,
    visible_projects,
    visible_users,
)
from portal.foundation.event_text import action_label, target_label
from portal.iam.permissions import Perm
from portal.iam.tokens import revoke_tokens
from portal.models import ApiToken, AuditEvent, Project, Role, RoleBinding

# The other apps' admins build on these.
__all__ = ["ConsoleAdmin", "MadeElsewhere", "ProjectScopedAdmin", "ReadOnly"]

admin.site.site_header = _("GPU 클라우드 콘솔")
admin.site.site_title = _("GPU 클라우드 콘솔")
admin.site.index_title = _("관리")
# The lists are wide (a VM has nine columns): the app menu beside them left the last columns
# behind a scrollbar at 1280 px. The index and the breadcrumbs still lead everywhere.
admin.site.enable_nav_sidebar = False


class VisibleBindingFilter(admin.RelatedFieldListFilter):
    """A filter of accounts by their role bindings (``role_bindings__role``, ``__project``)
    that, for project staff, reads only the bindings of their projects, in the list and in
    its counts (facets): what an account holds in another project is that project's business.
    """

    def __init__(self, field, request, params, model, model_admin, field_path):
        self.viewer = request.user
        super().__init__(field, request, params, model, model_admin, field_path)

    def holders(self, values):
        """The accounts holding one of ``values`` in a binding of the viewer's projects."""
        bindings = RoleBinding.objects.filter(project__in=visible_projects(self.viewer))
        return bindings.filter(**{f"{self.field.name}__in": values}).values("user_id")

    def queryset(self, request, queryset):
        if self.viewer.is_superuser or not self.lookup_val:
            return super().queryset(request, queryset)
        try:
            return queryset.filter(pk__in=self.holders(self.lookup_val))
        except (ValueError, ValidationError) as exc:
            raise IncorrectLookupParameters(exc) from exc

    def get_facet_counts(self, pk_attname, filtered_qs):
        counts = super().get_facet_counts(pk_attname, filtered_qs)
        if not self.viewer.is_superuser:
            for pk, _label in self.lookup_choices:
                counts[f"{pk}__c"] = Count(pk_attname, filter=Q(pk__in=self.holders([pk])))
        return counts


class VisibleProjectFilter(VisibleBindingFilter):
    """The project filter on accounts: only the projects the staff user is in (one typed into
    the URL that is not theirs lists no one)."""

    def field_choices(self, field, request, model_admin):
        return [(project.pk, str(project)) for project in visible_projects(request.user)]


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


class AuditActionFilter(admin.SimpleListFilter):
    """작업 by its label (the console's words), over the actions of the events in scope."""

    title = _("작업")
    parameter_name = "action"

    def lookups(self, request, model_admin):
        actions = model_admin.get_queryset(request).order_by().values_list("action", flat=True)
        return sorted(((a, action_label(a)) for a in actions.distinct()), key=lambda c: c[1])

    def queryset(self, request, queryset):
        return queryset.filter(action=self.value()) if self.value() else queryset


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnly, ProjectScopedAdmin):
    """The audit log as the 활동 tab words it: actions, targets and messages as labels."""

    list_display = ["at", "project", "actor", "action_name", "target", "outcome", "message_text"]
    list_filter = ["outcome", AuditActionFilter, "project"]
    search_fields = ["target_name", "message", "actor__username", "request_id"]
    date_hierarchy = "at"
    list_select_related = ["project", "actor"]
    fields = (
        "at", "project", "actor", "action_name", "target", "target_id", "cluster_id",
        "outcome", "message_text", "request_id", "client_request_id",
    )  # fmt: skip
    readonly_fields = fields

    def scope(self, queryset, user):
        """The events of the projects the staff user holds a role in."""
        return queryset.filter(project__in=visible_projects(user))

    @admin.display(description=_("작업"), ordering="action")
    def action_name(self, event):
        return event.action_label

    @admin.display(description=_("대상"), ordering="target_name")
    def target(self, event):
        return f"{target_label(event.target_type)} {event.target_name}".strip()

    @admin.display(description=_("메시지"))
    def message_text(self, event):
        return event.text


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
    """Users are global (a project admin binds existing users), but project staff see only
    their projects' members and the accounts they added (``visible_users``), and change or
    delete only accounts wholly inside the projects they manage: one with a role elsewhere,
    or a superuser, belongs to someone else too (its password, its bindings). Their own account
    is not one of them (its privileges are a platform admin's to change), and the fields
    that grant anything beyond a project (``PLATFORM_FIELDS``) are neither shown to nor
    taken from project staff."""

    project_scoped = True  # within reach: see _within_reach
    inlines = [UserRoleBindingInline]
    list_filter = [
        *UserAdmin.list_filter,
        ("role_bindings__role", VisibleBindingFilter),
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

    def get_queryset(self, request):
        """The accounts the staff user may see at all (``visible_users``): the list, its
        filters, the change and history pages and the autocompletes that pick a user."""
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(pk__in=visible_users(request.user).values("pk"))

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
