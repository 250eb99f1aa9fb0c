from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.utils.translation import gettext_lazy as _

from portal.models import AuditEvent, Project, Role, RoleBinding, project_permissions
from portal.permissions import Perm


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


class RoleBindingInline(admin.TabularInline):
    model = RoleBinding
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    inlines = [RoleBindingInline]


@admin.register(Role)
class RoleAdmin(admin.ModelAdmin):
    form = RoleForm
    list_display = ["name", "description", "permission_list"]
    search_fields = ["name"]

    @admin.display(description=_("권한"))
    def permission_list(self, role):
        return ", ".join(role.permissions)


@admin.register(RoleBinding)
class RoleBindingAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "role"]
    list_filter = ["role", "project"]
    search_fields = ["user__username", "project__name", "role__name"]
    autocomplete_fields = ["user", "project"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["at", "project", "actor", "action", "target_type", "target_name", "outcome"]
    list_filter = ["outcome", "action", "target_type", "project"]
    search_fields = ["target_name", "message", "actor__username", "request_id"]
    date_hierarchy = "at"
    list_select_related = ["project", "actor"]

    def get_queryset(self, request):
        """Staff see the events of the projects they hold a role in (superusers: all)."""
        events = super().get_queryset(request)
        if request.user.is_superuser:
            return events
        return events.filter(project_id__in=list(project_permissions(request.user)))

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class UserRoleBindingInline(admin.TabularInline):
    model = RoleBinding
    extra = 0
    autocomplete_fields = ["project"]
    verbose_name_plural = _("프로젝트 역할")


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class PortalUserAdmin(UserAdmin):
    inlines = [UserRoleBindingInline]
    list_filter = [*UserAdmin.list_filter, "role_bindings__role", "role_bindings__project"]
