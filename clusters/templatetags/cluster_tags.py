"""The cluster list's rows and the 연결된 가상머신 tab's rows, rendered in Python.

A cluster may have hundreds of members and a project thousands of clusters: the template
engine's per-variable cost (resolve, escape, lazy checks: ~19 per row) made the member tab
8-15x the floor view (bench_pages). format_html escapes every value.
"""

from django import template
from django.utils.html import format_html

from portal.templatetags.console import join_rows, short_time, status_badge, url_pattern
from vms.models import FabricType
from vms.templatetags.vm_tags import BILLING_LABELS, VmButtons

register = template.Library()
FABRIC_LABELS = dict(FabricType.choices)


@register.simple_tag
def cluster_rows(clusters):
    """The cluster list's table body (name, status, fabric, type, zone, members, created);
    ``clusters`` come annotated with ``member_count``, ``zone_code`` and ``type_code``."""
    detail = url_pattern("clusters:cluster_detail")
    return join_rows(
        format_html(
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
            '<td class="num">{}</td><td>{}</td></tr>',
            detail.format(pk=c.pk),
            c.name,
            status_badge(c),
            FABRIC_LABELS.get(c.fabric_type, c.fabric_type),
            c.type_code,
            c.zone_code,
            int(c.member_count),
            short_time(c.created_at),
        )
        for c in clusters
    )


@register.simple_tag(takes_context=True)
def member_rows(context, members, cluster, can_update):
    """The Connected VMs table body: name, status, IPs, billing, and the VM's button."""
    edit = url_pattern("vms:vm_edit")
    buttons = VmButtons(str(context.get("csrf_token", "")), compact=True)
    return join_rows(
        format_html(
            '<tr data-vm="{name}"><td><a href="{url}">{name}</a></td><td>{badge}</td>'
            '<td>{ip}</td><td class="mono">{fabric}</td><td>{billing}</td>'
            '<td class="row-actions">{action}</td></tr>',
            name=vm.name,
            url=edit.format(pk=vm.pk),
            badge=status_badge(vm),
            ip=vm.private_ip or "-",
            fabric=vm.fabric_address or "-",
            billing=BILLING_LABELS.get(vm.billing_type, vm.billing_type),
            action=buttons(vm, cluster) if can_update else "",
        )
        for vm in members
    )
