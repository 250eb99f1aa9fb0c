"""The VM's start/stop button, one helper for every page that offers it, and VM labels."""

from html import escape

from django import template
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
    """Start/stop buttons for many VMs of one page: URLs, labels and the form's fixed parts
    are made once, each row is one f-string (format_html per button, with its nested
    format_html calls, was a fifth of the 256-member tab).

    ``compact`` is the row form (small button, no swap: the table refreshes itself on
    ``vm-changed``); otherwise the VM page's header, which swaps ``#vm-status``.
    Every value is escaped with the standard library's ``html.escape`` (what Django's
    ``escape`` calls)."""

    def __init__(self, csrf_token, *, compact=True, next_url=""):
        self.start_url = escape(url_pattern("vms:vm_start"))
        self.stop_url = escape(url_pattern("vms:vm_stop"))
        self.swap = ROW_SWAP if compact else HEADER_SWAP
        self.hidden = (
            f'<input type="hidden" name="csrfmiddlewaretoken" value="{escape(str(csrf_token))}">'
        )
        if next_url:
            self.hidden += f'<input type="hidden" name="next" value="{escape(str(next_url))}">'
        self.start_css = "btn btn-small" if compact else "btn btn-primary"
        self.stop_css = "btn btn-small" if compact else "btn"
        self.start_label = escape(gettext("시작"))
        self.stop_label = escape(gettext("중지"))
        self.start_confirm = gettext("%(name)s을(를) 시작합니다")
        self.stop_confirm = gettext("%(name)s을(를) 중지합니다")

    def __call__(self, vm, cluster=None, reason_id=""):
        """The button ``vm`` offers now (or ""): start while stopped, stop while running,
        each confirmed in the console's dialog. A start the rules would refuse (a member of
        a cluster not 실행중) is shown disabled with the rule's message, described by the
        page's visible note ``reason_id`` where there is one; the server refuses it anyway."""
        if vm.status in VM_STARTABLE:
            refusal = start_refusal(vm, cluster)
            url, label, confirm, css = (
                self.start_url,
                self.start_label,
                self.start_confirm,
                self.start_css,
            )
            danger = ""
        elif vm.status in VM_STOPPABLE:
            refusal = None
            url, label, confirm, css = (
                self.stop_url,
                self.stop_label,
                self.stop_confirm,
                self.stop_css,
            )
            danger = " data-confirm-danger"
        else:
            return ""
        url = url.format(pk=int(vm.pk))
        disabled = ""
        if refusal:
            disabled = f' disabled title="{escape(refusal.message)}"'
            if reason_id:
                disabled += f' aria-describedby="{escape(reason_id)}"'
        ask = escape(with_particles(confirm % {"name": vm.name}))
        return mark_safe(  # noqa: S308 - every value is escaped above or here
            f'<form method="post" action="{url}" hx-post="{url}" {self.swap} hx-confirm="{ask}"'
            f' data-confirm-ok="{label}"{danger}>'
            f'{self.hidden}<button type="submit" class="{css}"'
            f' aria-label="{escape(str(vm.name))} {label}"{disabled}>{label}</button></form>'
        )


@register.simple_tag(takes_context=True)
def vm_action_button(context, vm, cluster=None, compact=False, next_url=""):
    """``{% vm_action_button vm vm.cluster %}``: the start/stop button of one VM."""
    return VmButtons(str(context.get("csrf_token", "")), compact=compact, next_url=next_url)(
        vm, cluster
    )
