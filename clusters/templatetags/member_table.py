"""The 연결된 가상머신 tab's rows with their selection checkbox and 분리, rendered in
Python like ``cluster_tags.cluster_rows`` (256 rows through the template engine cost 8-15x the
floor view). What each row offers comes from ``views_members.member_controls``: the
preflights' answers, never a rule of its own.
"""

from html import escape

from django import template
from django.utils.safestring import mark_safe
from django.utils.translation import gettext

from clusters.validation.display import latest_verdicts, verdict_cell
from portal.particles import with_particles
from portal.templatetags.console import status_badge, url_pattern
from vms.templatetags.vm_tags import BILLING_LABELS, VmButtons

register = template.Library()
# The tab's one form for the rows' own buttons (start, stop, 분리): it carries the CSRF token
# once, where a form per button carried it 256 times (a sixth of the rows' bytes).
ROW_FORM = "member-row-action"


@register.simple_tag(takes_context=True)
def member_row_form(context):
    """The form every row's button submits through (``form`` and ``formaction``)."""
    token = escape(str(context.get("csrf_token", "")))
    return mark_safe(  # noqa: S308 - the token is escaped
        f'<form id="{ROW_FORM}" method="post" hidden>'
        f'<input type="hidden" name="csrfmiddlewaretoken" value="{token}"></form>'
    )


class DetachButtons:
    """The per-row 분리 button, submitted through the tab's ``ROW_FORM`` with the member as
    its value (confirmed in the console's dialog first), or disabled with its reason, which
    the tab shows once above the table (``reason_ids``)."""

    def __init__(self, cluster, reason_ids):
        url = escape(url_pattern("clusters:cluster_detach").format(pk=cluster.pk))
        self.label = escape(gettext("분리"))
        detail = escape(gettext("분리한 가상머신은 일반 가상머신으로 남습니다."))
        self.head = (
            f'<button form="{ROW_FORM}" formaction="{url}" hx-post="{url}" hx-swap="none"'
            f' data-confirm-ok="{self.label}" data-confirm-danger'
            f' data-confirm-detail="{detail}" name="vm" value="'
        )
        self.confirm = gettext("%(name)s을(를) %(cluster)s에서 분리합니다")
        self.cluster_name = cluster.name
        self.reason_ids = reason_ids

    def __call__(self, vm, name, reason) -> str:
        """``name`` is the VM's name already escaped; every other value is escaped here."""
        disabled = ""
        if reason:
            disabled = (
                f' disabled title="{escape(reason)}"'
                f' aria-describedby="{self.reason_ids.get(reason, "")}"'
            )
        question = with_particles(self.confirm % {"name": vm.name, "cluster": self.cluster_name})
        return (
            f'{self.head}{int(vm.pk)}" hx-confirm="{escape(question)}"'
            f' class="btn btn-small btn-ghost-danger"'
            f' aria-label="{name} {self.label}"{disabled}>{self.label}</button>'
        )


def cell_labels() -> dict[str, str]:
    """The column names a phone shows beside each value (``data-label``): there the rows
    are cards and the header row is out of sight (static/portal/console.css)."""
    return {
        key: escape(gettext(label))
        for key, label in (
            ("ip", "사설 IP"),
            ("fabric", "패브릭 주소"),
            ("billing", "과금 유형"),
            ("verdict", "검증"),
        )
    }


@register.simple_tag
def member_table_rows(members, cluster, controls):
    """The table body: [checkbox] name, status, IPs, billing, start/stop and 분리.

    Each row is one f-string whose every value is escaped with the standard library's
    ``html.escape`` (format_html per cell, 6 a row, and Django's lazy-aware escape were 40%
    of the tab's time at 256 members). Rows and cells carry their ARIA roles: on a phone
    they are laid out as cards (CSS grid), which must not cost the table its semantics."""
    edit = url_pattern("vms:vm_edit")
    can_update = controls["can_update_vm"]
    startable, stoppable, detachable = (
        controls["startable"],
        controls["stoppable"],
        controls["detach"],
    )
    buttons = VmButtons(compact=True, form=ROW_FORM)
    reason_ids = {
        reason: f"detach-reason-{index}"
        for index, reason in enumerate(controls.get("detach_reasons", ()), start=1)
    }
    detach = DetachButtons(cluster, reason_ids)
    select_label = escape(gettext("%(name)s 선택"))  # filled with the name escaped
    billing = {code: escape(str(text)) for code, text in BILLING_LABELS.items()}
    verdicts = latest_verdicts(cluster)  # the last 검증 verdict, 교체 on 불량
    label = cell_labels()
    ip_cell = f'<td role="cell" data-label="{label["ip"]}">'
    # The address in the code font, its phone label (::before) in the text font.
    fabric_cell = f'<td role="cell" data-label="{label["fabric"]}"><span class="mono">'
    billing_cell = f'<td role="cell" data-label="{label["billing"]}">'
    verdict_head = f'<td role="cell" class="verdict" data-label="{label["verdict"]}">'
    # A running bulk start or stop has not reached these rows yet (``views`` reads them).
    waiting = controls.get("queued", set())
    waiting_label = escape(gettext("대기 중"))
    queued = f' <span class="row-queued">{waiting_label}</span>'

    badges: dict[str, str] = {}  # one badge per status (the language is the page's)
    rows = []
    for vm in members:
        pk, name = int(vm.pk), escape(vm.name)
        badge = badges.get(vm.status) or badges.setdefault(vm.status, status_badge(vm))
        checkbox = actions = ""
        if can_update:
            flags = (" data-startable" if pk in startable else "") + (
                " data-stoppable" if pk in stoppable else ""
            )
            checkbox = (
                f'<td role="cell" class="select"><input type="checkbox" name="vm" value="{pk}"'
                f' form="members-selected" id="select-{pk}"'
                f' data-name="{name}"'
                f' aria-label="{select_label % {"name": name}}"{flags}></td>'
            )
            actions = buttons(vm, cluster, reason_id="member-start-reason", name=name)
            if pk in detachable:
                actions += detach(vm, name, detachable[pk])
        rows.append(
            f'<tr role="row" data-vm="{name}">{checkbox}'
            f'<td role="cell" class="member-name"><a href="{edit.format(pk=pk)}">{name}</a></td>'
            f'<td role="cell" class="member-status">{badge}'
            f"{queued if pk in waiting else ''}</td>"
            f"{ip_cell}{escape(vm.private_ip or '-')}</td>"
            f"{fabric_cell}{escape(vm.fabric_address or '-')}</span></td>"
            f"{billing_cell}{billing.get(vm.billing_type) or escape(vm.billing_type)}</td>"
            f"{verdict_head}{verdict_cell(verdicts.get(pk), vm, cluster, can_update)}</td>"
            f'<td role="cell" class="row-actions">{actions}</td></tr>'
        )
    return mark_safe("\n".join(rows))  # noqa: S308 - every value above is escaped
