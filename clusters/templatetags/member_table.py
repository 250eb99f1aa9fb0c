"""The 연결된 가상머신 tab's rows with their selection checkbox and 분리 (issue 11), rendered in
Python like ``cluster_tags.member_rows`` (256 rows through the template engine cost 8-15x the
floor view). What each row offers comes from ``views_members.member_controls``: the
preflights' answers, never a rule of its own.
"""

from django import template
from django.utils.html import format_html
from django.utils.translation import gettext

from portal.templatetags.console import join_rows, status_badge, url_pattern
from vms.templatetags.vm_tags import BILLING_LABELS, VmButtons

register = template.Library()


class DetachButtons:
    """The per-row 분리 form (confirm first), or the reason it is disabled."""

    def __init__(self, cluster, csrf_token):
        self.url = url_pattern("clusters:cluster_detach").format(pk=cluster.pk)
        self.csrf = csrf_token
        self.label = gettext("분리")
        self.confirm = gettext("%(name)s을(를) 클러스터에서 분리하시겠습니까?")

    def __call__(self, vm, reason):
        return format_html(
            '<form method="post" action="{url}" hx-post="{url}" hx-swap="none"'
            ' hx-confirm="{confirm}">'
            '<input type="hidden" name="csrfmiddlewaretoken" value="{csrf}">'
            '<input type="hidden" name="vm" value="{pk}">'
            '<button type="submit" class="btn btn-small btn-ghost-danger"'
            ' aria-label="{name} {label}"{disabled}>{label}</button></form>',
            url=self.url,
            confirm=self.confirm % {"name": vm.name},
            csrf=self.csrf,
            pk=vm.pk,
            name=vm.name,
            label=self.label,
            disabled=format_html(' disabled title="{}"', reason) if reason else "",
        )


@register.simple_tag(takes_context=True)
def member_table_rows(context, members, cluster, controls):
    """The table body: [checkbox] name, status, IPs, billing, start/stop and 분리."""
    csrf = str(context.get("csrf_token", ""))
    edit = url_pattern("vms:vm_edit")
    can_update = controls["can_update_vm"]
    buttons = VmButtons(csrf, compact=True)
    detach = DetachButtons(cluster, csrf)
    select_label = gettext("%(name)s 선택")
    rows = []
    for vm in members:
        checkbox = ""
        actions = ""
        if can_update:
            checkbox = format_html(
                '<td class="select"><input type="checkbox" name="vm" value="{pk}"'
                ' form="members-selected" id="select-{pk}" aria-label="{label}"{flags}></td>',
                pk=vm.pk,
                label=select_label % {"name": vm.name},
                flags=format_html(
                    "{}{}",
                    " data-startable" if vm.pk in controls["startable"] else "",
                    " data-stoppable" if vm.pk in controls["stoppable"] else "",
                ),
            )
            actions = buttons(vm, cluster)
            if vm.pk in controls["detach"]:
                actions = format_html("{}{}", actions, detach(vm, controls["detach"][vm.pk]))
        rows.append(
            format_html(
                '<tr data-vm="{name}">{checkbox}<td><a href="{url}">{name}</a></td><td>{badge}</td>'
                '<td>{ip}</td><td class="mono">{fabric}</td><td>{billing}</td>'
                '<td class="row-actions">{actions}</td></tr>',
                name=vm.name,
                checkbox=checkbox,
                url=edit.format(pk=vm.pk),
                badge=status_badge(vm),
                ip=vm.private_ip or "-",
                fabric=vm.fabric_address or "-",
                billing=BILLING_LABELS.get(vm.billing_type, vm.billing_type),
                actions=actions,
            )
        )
    return join_rows(rows)
