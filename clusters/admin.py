"""Operators' view of clusters. Status is never edited here: the actions are the
``clusters.operations`` calls the console and the API make, so the admin obeys every rule
they do and leaves the same Operation and audit event. 지금 복구 is the reconciler's repair,
which no other surface offers."""

from typing import cast

from django.contrib import admin, messages
from django.db.models import Count
from django.utils.translation import gettext_lazy as _

from clusters import operations, progress
from clusters.models import Operation, OperationItem, ValidationThreshold, VirtualCluster
from portal.admin import ConsoleAdmin, ProjectScopedAdmin, ReadOnly
from portal.foundation.errors import RuleViolation
from portal.iam.permissions import Perm
from vms.models import VirtualMachine, VirtualMachineQuerySet


def each_action(description, action, done):
    """An admin action calling ``action(pk, actor=…)`` for each selected row: each refusal is
    reported on its own, then how many succeeded (``done``, with ``%(count)d``)."""

    @admin.action(description=description)
    def run(modeladmin, request, queryset):
        ok = 0
        for obj in queryset:
            try:
                action(obj.pk, actor=request.user)
                ok += 1
            except RuleViolation as exc:
                modeladmin.message_user(request, f"{obj}: {exc.message}", messages.ERROR)
        if ok:
            modeladmin.message_user(request, done % {"count": ok}, messages.SUCCESS)

    return run


class LastErrorShown:
    """``last_error_message``: a row's last error in the reader's words, or the admin's
    empty mark (the property itself showed "None" in a change form)."""

    @admin.display(description=_("마지막 오류"))
    def last_error_message(self, obj) -> str:
        error = obj.last_error
        return error.message if error is not None else "-"


class StatusByServicesAdmin(LastErrorShown, ReadOnly, ProjectScopedAdmin):
    """Created in the console, changed only by the services' actions, never edited here."""


class MemberInline(admin.TabularInline):
    model = VirtualMachine
    fk_name = "cluster"
    readonly_fields = (
        "name",
        "status",
        "billing_type",
        "disaster_recovery",
        "private_ip",
        "fabric_guid",
        "fabric_lid",
        "fabric_ip",
    )
    fields = readonly_fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        """The members the console would list: only with VM READ in the cluster's project."""
        rows = cast(VirtualMachineQuerySet, super().get_queryset(request))  # the model's own
        return rows.restrict(request.user, Perm.VM_READ)


@admin.register(VirtualCluster)
class VirtualClusterAdmin(StatusByServicesAdmin):
    list_display = [
        "name",
        "project",
        "status",
        "fabric_type",
        "instance_type",
        "zone",
        "member_count",
        "created_at",
        "last_error_message",
    ]
    list_filter = ["status", "fabric_type", "zone", "instance_type", "project"]
    search_fields = ["name", "project__name", "error_code"]
    list_select_related = ["project", "zone", "instance_type"]
    # What the user chose and sees first; the walk's own bookkeeping after.
    readonly_fields = [
        "name",
        "project",
        "zone",
        "instance_type",
        "fabric_type",
        "ssh_keys",
        "status",
        "last_error_message",
        "created_by",
        "created_at",
        "status_changed_at",
        "operation",
        "previous_status",
        "generation",
    ]
    exclude = ["error_code", "error_params"]  # said in words, as 마지막 오류
    inlines = [MemberInline]
    actions = ["start", "stop", "force_reconcile"]

    def scope(self, queryset, user):
        return queryset.restrict(user, Perm.CLUSTER_READ)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_members=Count("members"))

    @admin.display(description=_("멤버"), ordering="n_members")
    def member_count(self, cluster):
        return cluster.n_members

    start = each_action(
        _("클러스터 시작"), operations.start_cluster_op, _("%(count)d개 시작을 요청했습니다.")
    )
    stop = each_action(
        _("클러스터 중지"), operations.stop_cluster_op, _("%(count)d개를 중지했습니다.")
    )
    force_reconcile = each_action(
        _("지금 복구 (강제 조정)"), progress.repair_cluster, _("%(count)d개를 조정했습니다.")
    )


@admin.register(ValidationThreshold)
class ValidationThresholdAdmin(ConsoleAdmin):
    """클러스터 검증's thresholds per instance type and fabric; each field's help text and
    the row's 출처 say where the figure comes from. A run keeps the figures it judged by."""

    list_display = [
        "instance_type",
        "fabric",
        "ports",
        "port_gbps",
        "intra_busbw_gbs",
        "multi_busbw_gbs",
        "ib_write_bw_gbps",
        "margin_percent",
        "straggler_gpu_points",
        "straggler_port_percent",
        "straggler_minutes",
    ]
    list_filter = ["instance_type", "fabric"]


class OperationItemInline(LastErrorShown, admin.TabularInline):
    model = OperationItem
    readonly_fields = (
        "position",
        "target_name",
        "vm",
        "status",
        "last_error_message",
        "started_at",
        "finished_at",
    )
    fields = readonly_fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Operation)
class OperationAdmin(StatusByServicesAdmin):
    """Bulk actions as recorded: who did what to which VMs, and each VM's outcome."""

    list_display = ["__str__", "project", "cluster", "actor", "created_at", "finished_at"]
    list_filter = ["kind", "project"]
    list_select_related = ["project", "cluster", "actor"]
    readonly_fields = [
        "kind",
        "project",
        "cluster",
        "actor",
        "created_at",
        "finished_at",
        "last_error_message",
        "idempotency_key",
        "idempotency_scope",
    ]
    exclude = ["request_hash", "error_code", "error_params"]
    inlines = [OperationItemInline]

    def scope(self, queryset, user):
        return queryset.restrict(user, Perm.CLUSTER_READ)
