"""The compute app in the admin. The simulator's capacity is edited by platform admins; its
allocations are made by the backend and read in their cluster's project. GPU hosts are for
platform admins (superusers) only: project staff neither see nor change hosts, their
inventory, placements or fabric partitions. Inventory, placements and partitions are written
by the backend, never by hand (``ReadOnly``). A host's add, change, delete and 동기화 go
through ``portal.compute.hosts``, which audits each; its URI is checked by the model's
``clean`` (``uri_refusal``), whose allowed forms the field's help lists."""

from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from clusters.models import VirtualCluster
from portal.admin import ConsoleAdmin, MadeElsewhere, ProjectScopedAdmin, ReadOnly
from portal.compute import hosts
from portal.compute.models import SimulatorAllocation, SimulatorCapacity
from portal.compute.models.hosts import FabricPartition, GpuHost, HostDevice, Placement, uri_help
from portal.foundation.errors import BackendError
from portal.iam.permissions import Perm


class DeviceInline(ReadOnly, admin.TabularInline):
    model = HostDevice
    readonly_fields = (
        "kind",
        "address",
        "model",
        "numa_node",
        "parent",
        "emulated",
        "missing",
        "placement",
    )
    fields = readonly_fields
    extra = 0


@admin.register(GpuHost)
class GpuHostAdmin(ConsoleAdmin):
    platform_only = True
    list_display = ["name", "zone", "fabric", "state", "block", "leaf", "rack", "uri", "synced_at"]
    list_filter = ["zone", "fabric", "state", "block"]
    search_fields = ["name", "uri", "leaf", "rack"]
    readonly_fields = ["cpus_by_node", "synced_at", "sync_error"]
    inlines = [DeviceInline]
    actions = ["sync"]

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "uri":
            kwargs["help_text"] = uri_help()
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        hosts.save_host(obj, actor=request.user)

    def delete_model(self, request, obj):
        hosts.delete_host(obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for host in queryset:
            hosts.delete_host(host, actor=request.user)

    @admin.action(description=_("동기화"))
    def sync(self, request, queryset):
        for host in queryset:
            try:
                count = hosts.sync(host, actor=request.user)
            except BackendError as exc:
                self.message_user(request, f"{host}: {exc.message}", messages.ERROR)
                continue
            self.message_user(
                request,
                _("%(host)s: 장치 %(count)d개") % {"host": host, "count": count},
                messages.SUCCESS,
            )


@admin.register(Placement)
class PlacementAdmin(ReadOnly, ConsoleAdmin):
    platform_only = True
    list_display = ["vm", "host", "cluster", "numa_node", "held", "domain_host"]
    list_filter = ["held", "host"]


@admin.register(FabricPartition)
class FabricPartitionAdmin(ReadOnly, ConsoleAdmin):
    platform_only = True
    list_display = ["cluster", "fabric", "partition_key", "vlan", "block", "configured"]

    @admin.display(description=_("파티션 키(PKey)"))
    def partition_key(self, obj):
        return obj.pkey_hex


@admin.register(SimulatorCapacity)
class SimulatorCapacityAdmin(ConsoleAdmin):
    list_display = ["zone", "instance_type", "fabric", "total_nodes"]
    list_editable = ["total_nodes"]
    list_filter = ["zone", "instance_type", "fabric"]


@admin.register(SimulatorAllocation)
class SimulatorAllocationAdmin(MadeElsewhere, ProjectScopedAdmin):
    list_display = ["cluster", "capacity", "nodes", "configured", "created_at"]
    list_select_related = ["cluster", "capacity__zone", "capacity__instance_type"]

    def scope(self, queryset, user):
        return queryset.filter(cluster__in=VirtualCluster.objects.restrict(user, Perm.CLUSTER_READ))
