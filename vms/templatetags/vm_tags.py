"""The VM's start/stop button, one helper for every page that offers it, and VM labels."""

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext

from portal.particles import with_particles
from portal.templatetags.console import url_pattern
from vms.models import VM_STARTABLE, VM_STOPPABLE, BillingType
from vms.services import start_refusal

register = template.Library()
ROW_SWAP = mark_safe('hx-swap="none"')
HEADER_SWAP = mark_safe('hx-target="#vm-status" hx-swap="outerHTML"')
BILLING_LABELS = dict(BillingType.choices)


@register.simple_tag
def billing_label(vm):
    return BILLING_LABELS.get(vm.billing_type, vm.billing_type)


class VmButtons:
    """Start/stop buttons for many VMs of one page: URLs and labels are made once.

    ``compact`` is the row form (small button, no swap: the table refreshes itself on
    ``vm-changed``); otherwise the VM page's header, which swaps ``#vm-status``.
    """

    def __init__(self, csrf_token, *, compact=True, next_url=""):
        self.start_url = url_pattern("vms:vm_start")
        self.stop_url = url_pattern("vms:vm_stop")
        self.csrf = csrf_token
        self.compact = compact
        self.next_url = next_url
        self.start_label = gettext("시작")
        self.stop_label = gettext("중지")
        self.start_confirm = gettext("%(name)s을(를) 시작합니다")
        self.stop_confirm = gettext("%(name)s을(를) 중지합니다")

    def __call__(self, vm, cluster=None, reason_id=""):
        """The button ``vm`` offers now (or ""): start while stopped, stop while running,
        each confirmed in the console's dialog. A start the rules would refuse (a member of
        a cluster not 실행중) is shown disabled with the rule's message, described by the
        page's visible note ``reason_id`` where there is one; the server refuses it anyway."""
        if vm.status in VM_STARTABLE:
            refusal = start_refusal(vm, cluster)
            url, label, confirm = self.start_url, self.start_label, self.start_confirm
            css = "btn btn-small" if self.compact else "btn btn-primary"
            danger = ""
        elif vm.status in VM_STOPPABLE:
            refusal = None
            url, label, confirm = self.stop_url, self.stop_label, self.stop_confirm
            css = "btn btn-small" if self.compact else "btn"
            danger = " data-confirm-danger"
        else:
            return ""
        url = url.format(pk=vm.pk)
        swap = ROW_SWAP if self.compact else HEADER_SWAP
        disabled = ""
        if refusal:
            disabled = format_html(' disabled title="{}"', refusal.message)
            if reason_id:
                disabled += format_html(' aria-describedby="{}"', reason_id)
        return format_html(
            '<form method="post" action="{url}" hx-post="{url}" {swap} hx-confirm="{confirm}"'
            ' data-confirm-ok="{label}"{danger}>'
            '<input type="hidden" name="csrfmiddlewaretoken" value="{csrf}">{next}'
            '<button type="submit" class="{css}" aria-label="{name} {label}"{disabled}>'
            "{label}</button></form>",
            url=url,
            swap=swap,
            confirm=with_particles(confirm % {"name": vm.name}),
            danger=mark_safe(danger),  # noqa: S308 - a constant
            csrf=self.csrf,
            next=format_html('<input type="hidden" name="next" value="{}">', self.next_url)
            if self.next_url
            else "",
            css=css,
            name=vm.name,
            label=label,
            disabled=disabled,
        )


@register.simple_tag(takes_context=True)
def vm_action_button(context, vm, cluster=None, compact=False, next_url=""):
    """``{% vm_action_button vm vm.cluster %}``: the start/stop button of one VM."""
    return VmButtons(str(context.get("csrf_token", "")), compact=compact, next_url=next_url)(
        vm, cluster
    )
