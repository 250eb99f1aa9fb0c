from django.contrib import admin

from metrics.models import MetricsToken


@admin.register(MetricsToken)
class MetricsTokenAdmin(admin.ModelAdmin):
    """Who holds an agent token (never the secret). Revoking is deleting: the agent gets 401."""

    list_display = ["vm", "prefix", "created_by", "created_at"]
    search_fields = ["vm__name", "prefix"]
    list_select_related = ["vm", "created_by"]
    readonly_fields = ["vm", "token_hash", "prefix", "created_by", "created_at"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
