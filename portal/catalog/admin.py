"""The catalog, edited here by the platform's admins."""

from django.contrib import admin

from portal.admin import ConsoleAdmin
from portal.catalog.models import FabricOffering, InstanceType, Zone


@admin.register(Zone)
class ZoneAdmin(ConsoleAdmin):
    list_display = ["code", "name"]
    search_fields = ["code", "name"]


class FabricOfferingInline(admin.TabularInline):
    model = FabricOffering
    extra = 1


@admin.register(InstanceType)
class InstanceTypeAdmin(ConsoleAdmin):
    list_display = ["code", "gpu_model", "gpu_count", "gpu_memory_gib", "vcpu", "memory_gib"]
    search_fields = ["code", "gpu_model"]
    inlines = [FabricOfferingInline]


@admin.register(FabricOffering)
class FabricOfferingAdmin(ConsoleAdmin):
    list_display = ["instance_type", "zone", "fabric"]
    list_filter = ["zone", "fabric", "instance_type"]
