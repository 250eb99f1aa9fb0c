from django.contrib import admin

from metrics.models import MetricsToken
from portal.admin import MadeElsewhere, ProjectScopedAdmin
from portal.iam.permissions import Perm
from vms.models import VirtualMachine


@admin.register(MetricsToken)
class MetricsTokenAdmin(MadeElsewhere, ProjectScopedAdmin):
    """Who holds an agent token (never the secret, nor its hash). Revoking is deleting: the
    agent gets 401. Scoped like the console's token page: VM UPDATE in the VM's project."""

    list_display = ["vm", "prefix", "created_by", "created_at"]
    search_fields = ["vm__name", "prefix"]
    list_select_related = ["vm", "created_by"]
    readonly_fields = ("vm", "prefix", "created_by", "created_at")
    fields = readonly_fields

    def scope(self, queryset, user):
        return queryset.filter(vm__in=VirtualMachine.objects.restrict(user, Perm.VM_UPDATE))
