"""VMs (status changes only through ``clusters.operations``, as on the console and the API)."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from clusters import operations
from clusters.admin import StatusByServicesAdmin, each_action
from portal.iam.permissions import Perm
from vms import progress
from vms.models import VirtualMachine


@admin.register(VirtualMachine)
class VirtualMachineAdmin(StatusByServicesAdmin):
    list_display = [
        "name",
        "project",
        "status",
        "health",
        "zone",
        "instance_type",
        "billing_type",
        "disaster_recovery",
        "cluster",
        "private_ip",
    ]
    list_filter = [
        "status",
        "health",
        "billing_type",
        "disaster_recovery",
        "zone",
        "instance_type",
        "project",
    ]
    search_fields = ["name", "private_ip", "cluster__name", "project__name"]
    list_select_related = ["project", "zone", "instance_type", "cluster"]
    # What the user chose and sees first; addresses and bookkeeping after.
    readonly_fields = [
        "name",
        "project",
        "zone",
        "instance_type",
        "billing_type",
        "disaster_recovery",
        "status",
        "health",
        "health_evidence_text",
        "health_changed_at",
        "cluster",
        "node_rank",
        "ssh_keys",
        "last_error_message",
        "created_by",
        "created_at",
        "private_ip",
        "fabric_guid",
        "fabric_lid",
        "fabric_ip",
        "fabric_gid_index",
        "status_changed_at",
    ]
    # Said in words, as 마지막 오류 and 건강 상태 근거.
    exclude = ["error_code", "error_params", "health_code", "health_params"]
    actions = ["start", "stop", "force_reconcile"]

    @admin.display(description=_("건강 상태 근거"))
    def health_evidence_text(self, obj) -> str:
        return obj.health_evidence or "-"

    def scope(self, queryset, user):
        return queryset.restrict(user, Perm.VM_READ)

    start = each_action(_("시작"), operations.start_vm_op, _("%(count)d대 시작을 요청했습니다."))
    stop = each_action(_("중지"), operations.stop_vm_op, _("%(count)d대 중지를 요청했습니다."))
    force_reconcile = each_action(
        _("지금 복구 (강제 조정)"), progress.repair_vm, _("%(count)d대를 조정했습니다.")
    )
