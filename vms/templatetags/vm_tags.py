"""The VM's start/stop button, one helper for every page that offers it, and VM labels."""

from html import escape

from django import template
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, gettext_noop

from portal.templatetags.console import csrf_input, row_form, status_badge, url_pattern
from portal.web.particles import with_particles
from vms.models import VM_STARTABLE, VM_STOPPABLE, BillingType, VmHealth
from vms.services import start_refusal

register = template.Library()
ROW_SWAP = mark_safe('hx-swap="none"')
HEADER_SWAP = mark_safe('hx-target="#vm-status" hx-swap="outerHTML"')
BILLING_LABELS = dict(BillingType.choices)
# Per button: action, label, confirmation, css class on the VM page, danger flag.
START, STOP = gettext_noop("%(name)s을(를) 시작합니다"), gettext_noop("%(name)s을(를) 중지합니다")
BUTTONS = (
    ("start", gettext_noop("시작"), START, "btn btn-primary", ""),
    ("stop", gettext_noop("중지"), STOP, "btn", " data-confirm-danger"),
)


class VmButtons:
    """Start/stop buttons for many VMs of one page: URLs, labels and the form's fixed parts
    are made once, each row is one f-string (format_html per button, with its nested
    format_html calls, was a fifth of the 256-member tab).

    ``compact`` is the row form (small button, no swap: the table refreshes itself on
    ``vm-changed``); otherwise the VM page's header, which swaps ``#vm-status``.
    ``form`` names a form of the page that carries the CSRF token for every row: each button
    is then submitted through it (``formaction``), not wrapped in a form of its own.
    Every value is escaped with the standard library's ``html.escape`` (what Django's
    ``escape`` calls)."""

    def __init__(self, csrf_token="", *, compact=True, next_url="", form=""):
        self.swap = ROW_SWAP if compact else HEADER_SWAP
        self.form = escape(form)
        self.hidden = csrf_input(csrf_token)
        if next_url:
            self.hidden += f'<input type="hidden" name="next" value="{escape(str(next_url))}">'
        self.start, self.stop = (
            (
                escape(url_pattern(f"vms:vm_{action}")).split("{pk}"),
                escape(gettext(label)),
                gettext(confirm),
                "btn btn-small" if compact else header_css,
                danger,
            )
            for action, label, confirm, header_css, danger in BUTTONS
        )

    def __call__(self, vm, cluster=None, reason_id="", name=None):
        """The button ``vm`` offers now (or ""): start while stopped, stop while running,
        each confirmed in the console's dialog. A start the rules would refuse (a member of
        a cluster not 실행중) is shown disabled with the rule's message, described by the
        page's visible note ``reason_id`` where there is one; the server refuses it anyway.
        ``name`` is the VM's name escaped, where the row has escaped it already."""
        if vm.status in VM_STARTABLE:
            refusal, (pattern, label, confirm, css, danger) = start_refusal(vm, cluster), self.start
        elif vm.status in VM_STOPPABLE:
            refusal, (pattern, label, confirm, css, danger) = None, self.stop
        else:
            return ""
        url = f"{pattern[0]}{int(vm.pk)}{pattern[1]}"
        disabled = ""
        if refusal:
            disabled = f' disabled title="{escape(refusal.message)}"'
            if reason_id:
                disabled += f' aria-describedby="{escape(reason_id)}"'
        ask = escape(with_particles(confirm % {"name": vm.name}))
        name = escape(str(vm.name)) if name is None else name
        # SafeString itself, not mark_safe: its lazy-string check was a tenth of the button.
        if self.form:
            return SafeString(
                f'<button form="{self.form}" formaction="{url}" hx-post="{url}" {self.swap}'
                f' hx-confirm="{ask}" data-confirm-ok="{label}"{danger} class="{css}"'
                f' aria-label="{name} {label}"{disabled}>{label}</button>'
            )
        return SafeString(
            f'<form method="post" action="{url}" hx-post="{url}" {self.swap} hx-confirm="{ask}"'
            f' data-confirm-ok="{label}"{danger}>'
            f'{self.hidden}<button type="submit" class="{css}"'
            f' aria-label="{name} {label}"{disabled}>{label}</button></form>'
        )


# The list's one form for its rows' buttons (``vm_row_form``).
ROW_FORM = "vm-row-action"


@register.simple_tag(takes_context=True)
def vm_action_button(context, vm, cluster=None, compact=False, next_url=""):
    """``{% vm_action_button vm vm.cluster %}``: the start/stop button of one VM."""
    return VmButtons(str(context.get("csrf_token", "")), compact=compact, next_url=next_url)(
        vm, cluster
    )


@register.simple_tag(takes_context=True)
def vm_row_form(context):
    """The form every row's start or stop button submits through (``form`` and
    ``formaction``): the CSRF token and the way back to the list once, where a form per
    button carried them on each of 50 rows."""
    back = f'<input type="hidden" name="next" value="{escape(reverse("vms:vm_list"))}">'
    return row_form(ROW_FORM, context.get("csrf_token"), back)


@register.simple_tag
def vm_rows(vms, can_update):
    """The VM list's table body: name, status, zone, type, billing, 재해 복구, cluster (its
    name only to who may read clusters: ``vm.cluster_visible``), IP and the start/stop
    button, submitted through ``vm_row_form``; one f-string a row, every value escaped (as
    the cluster list's rows)."""
    edit, detail = url_pattern("vms:vm_edit"), url_pattern("clusters:cluster_detail")
    buttons = VmButtons(compact=True, form=ROW_FORM)
    yes, hidden = escape(gettext("예")), escape(gettext("권한 없음"))
    # Each value's column name, which a phone shows beside it (the rows are cards there).
    label = {
        key: escape(gettext(text))
        for key, text in (
            ("zone", "가용 영역"),
            ("type", "인스턴스 유형"),
            ("billing", "과금 유형"),
            ("dr", "재해 복구"),
            ("cluster", "클러스터"),
            ("ip", "사설 IP"),
        )
    }
    rows = []
    for vm in vms:
        if not vm.cluster_id:
            cluster = "-"
        elif vm.cluster_visible:
            url = detail.format(pk=int(vm.cluster_id))
            cluster = f'<a href="{url}">{escape(vm.cluster.name)}</a>'
        else:
            cluster = f'<span class="muted">{hidden}</span>'
        name, billing = escape(vm.name), BILLING_LABELS.get(vm.billing_type, vm.billing_type)
        rows.append(
            f'<tr data-vm="{name}"><td><a href="{edit.format(pk=int(vm.pk))}">{name}</a></td>'
            f"<td>{status_badge(vm)}</td>"
            f'<td data-label="{label["zone"]}">{escape(vm.zone.code)}</td>'
            f'<td data-label="{label["type"]}">{escape(vm.instance_type.code)}</td>'
            f'<td data-label="{label["billing"]}">{escape(str(billing))}</td>'
            f'<td data-label="{label["dr"]}">{yes if vm.disaster_recovery else "-"}</td>'
            f'<td data-label="{label["cluster"]}">{cluster}</td>'
            f'<td class="mono" data-label="{label["ip"]}">{escape(vm.private_ip or "-")}</td>'
            f'<td class="row-actions">{buttons(vm, vm.cluster) if can_update else ""}</td></tr>'
        )
    return mark_safe("\n".join(rows))  # noqa: S308 - every value above is escaped


HEALTH_LABELS = dict(VmHealth.choices)


def health_badge(state: str, evidence: str, *, with_evidence: bool = False) -> str:
    """A VM's health as a badge (``vms.health``), its evidence as the badge's title and, for
    a screen reader, its text — or, ``with_evidence``, as a line under it that everyone reads
    (no hover on a phone); "" for 정상 (the members tab and the lists mark only what is
    wrong). Every value is escaped here."""
    if state == VmHealth.OK:
        return ""
    label = escape(str(HEALTH_LABELS.get(state, state)))
    why = escape(evidence)
    said = f'<span class="visually-hidden">: {why}</span>' if why and not with_evidence else ""
    badge = (
        f'<span class="badge badge-health-{escape(state.lower())} row-health"'
        f' data-health="{escape(state)}" title="{why}">{label}{said}</span>'
    )
    if with_evidence and why:
        badge += f'<span class="health-evidence member-health-why">{why}</span>'
    return badge


@register.simple_tag
def vm_health_badge(vm):
    """``health_badge`` of one VM (the VM page's header: nothing while it is 정상)."""
    return mark_safe(health_badge(vm.health, vm.health_evidence))  # noqa: S308 - escaped


@register.simple_tag
def vm_health(vm):
    """The VM page's 건강 상태: its badge (정상 too) and, beside it, the evidence."""
    label = escape(str(HEALTH_LABELS.get(vm.health, vm.health)))
    state, code = escape(vm.health.lower()), escape(vm.health)
    badge = f'<span class="badge badge-health-{state}" data-health="{code}">{label}</span>'
    why = vm.health_evidence
    text = f' <span class="health-evidence">{escape(why)}</span>' if why else ""
    return mark_safe(f'<span id="vm-health">{badge}{text}</span>')  # noqa: S308 - escaped


LOGIN_USER = "vc"  # the guest's login user: the seed installs the VM's keys for it


def ssh_block(vm_pk: int, address: str | None, fingerprints, label: str = "") -> str:
    """How to connect to a VM: ``ssh vc@<address>`` with its 복사 button, and the host key
    fingerprints its agent reported, to check the first connection against. Every value
    is escaped here (a members tab draws one per member)."""
    if not address:
        return ""
    pk = int(vm_pk)
    copy = escape(gettext("복사"))
    head = f'<span class="code-label">{escape(label)}</span>' if label else ""
    if fingerprints:
        items = "".join(
            f'<li><span class="mono">{escape(kind)} {escape(fingerprint)}</span></li>'
            for kind, fingerprint in fingerprints
        )
        title = escape(gettext("호스트 키 지문"))
        keys = f'<ul class="host-keys" aria-label="{title}">{items}</ul>'
    else:
        waiting = escape(gettext("게스트의 에이전트가 아직 호스트 키를 보고하지 않았습니다."))
        keys = f'<p class="muted host-keys">{waiting}</p>'
    return (
        f'<div class="code-block ssh-connect" id="ssh-{pk}">'
        f'<div class="code-head">{head}<button type="button" class="btn btn-small copy"'
        f' data-copy="#ssh-command-{pk}">{copy}</button></div>'
        f'<pre class="code"><code id="ssh-command-{pk}">ssh {LOGIN_USER}@{escape(address)}'
        f"</code></pre>{keys}</div>"
    )


@register.simple_tag
def vm_ssh(vm, fingerprints):
    """The VM page's 접속 section body (``ssh_block``)."""
    return mark_safe(ssh_block(vm.pk, vm.private_ip, fingerprints))  # noqa: S308 - escaped
