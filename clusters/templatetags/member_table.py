"""The 연결된 가상머신 tab's rows with their selection checkbox and 분리, rendered in
Python like ``cluster_tags.cluster_rows`` (the template engine's per-variable cost dominated
256 rows). What each row offers comes from ``views_members.member_controls``: the
preflights' answers, never a rule of its own.
"""

from html import escape
from typing import NamedTuple

from django import template
from django.urls import get_script_prefix
from django.utils.safestring import mark_safe
from django.utils.translation import get_language, gettext

from clusters.validation.display import latest_verdicts, verdict_cell
from portal.speed.kept import Kept
from portal.templatetags.console import badge_of, row_form, url_pattern
from portal.web.particles import with_particles
from vms.host_keys import shown_host_keys
from vms.models import VirtualMachine, VmHealth, VmStatus
from vms.templatetags.vm_tags import BILLING_LABELS, VmButtons, health_badge, ssh_block

register = template.Library()
# The tab's one form for the rows' own buttons (start, stop, 분리): it carries the CSRF token
# once, where a form per button carried it 256 times (a sixth of the rows' bytes).
ROW_FORM = "member-row-action"


@register.simple_tag(takes_context=True)
def member_row_form(context):
    """The form every row's button submits through (``form`` and ``formaction``)."""
    return row_form(ROW_FORM, context.get("csrf_token"))


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
            ("rank", "순위"),
            ("ip", "사설 IP"),
            ("fabric", "패브릭 주소"),
            ("billing", "과금 유형"),
            ("verdict", "검증"),
        )
    }


class ClusterShown(NamedTuple):
    """What the rows read of their cluster (the 분리 URL and question, the start rule)."""

    pk: int
    name: str
    status: str


class Shown(NamedTuple):
    """A member as its row shows it. ``RowFrame.row`` draws the row from this alone, so it
    is also the row's key among the rows kept: a row is drawn again exactly when something
    it shows changed."""

    pk: int
    name: str
    rank: int  # its place in rank order (torchrun's --node_rank, the hostfile's line)
    status: str
    private_ip: str
    fabric_address: str
    billing_type: str
    startable: bool
    stoppable: bool
    detach: str | None  # None: no 분리; "": 분리 offered; else why it is disabled
    verdict: str  # the 검증 cell (HTML)
    queued: bool  # a running bulk start or stop has not reached it yet
    health: str = "OK"  # its health (``vms.health``): a badge beside its status unless 정상
    health_evidence: str = ""  # what set it, in the reader's language (its headline)


class RowFrame:
    """What every row of one table shares, made once per language, URL prefix, cluster as
    shown, permission and 분리 reasons (the frame's key): labels, cell heads, the buttons."""

    def __init__(self, cluster: ClusterShown, can_update: bool, detach_reasons: tuple):
        self.cluster, self.can_update = cluster, can_update
        self.edit = url_pattern("vms:vm_edit").split("{pk}")
        self.buttons = VmButtons(compact=True, form=ROW_FORM)
        reason_ids = {
            reason: f"detach-reason-{index}" for index, reason in enumerate(detach_reasons, 1)
        }
        self.detach = DetachButtons(cluster, reason_ids)
        self.select_label = escape(gettext("%(name)s 선택"))  # filled with the name escaped
        self.billing = {code: escape(str(text)) for code, text in BILLING_LABELS.items()}
        label = cell_labels()
        self.rank_cell = f'<td role="cell" class="num" data-label="{label["rank"]}">'
        self.ip_cell = f'<td role="cell" data-label="{label["ip"]}">'
        # The address in the code font, its phone label (::before) in the text font.
        self.fabric_cell = f'<td role="cell" data-label="{label["fabric"]}"><span class="mono">'
        self.billing_cell = f'<td role="cell" data-label="{label["billing"]}">'
        self.verdict_cell = f'<td role="cell" class="verdict" data-label="{label["verdict"]}">'
        queued = escape(gettext("대기 중"))  # outside the f-string, where makemessages finds it
        self.queued = f' <span class="row-queued">{queued}</span>'
        self.badges = {status: badge_of(VirtualMachine, status) for status in VmStatus.values}

    def row(self, m: Shown) -> str:
        """One row, every value escaped here (``m.verdict`` is HTML already)."""
        pk, name = int(m.pk), escape(m.name)
        checkbox = actions = ""
        if self.can_update:
            flags = (" data-startable" if m.startable else "") + (
                " data-stoppable" if m.stoppable else ""
            )
            checkbox = (
                f'<td role="cell" class="select"><input type="checkbox" name="vm" value="{pk}"'
                f' form="members-selected" id="select-{pk}"'
                f' data-name="{name}"'
                f' aria-label="{self.select_label % {"name": name}}"{flags}></td>'
            )
            actions = self.buttons(m, self.cluster, reason_id="member-start-reason", name=name)
            if m.detach is not None:
                actions += self.detach(m, name, m.detach)
        edit_head, edit_tail = self.edit
        badge = self.badges.get(m.status) or badge_of(VirtualMachine, m.status)
        health = health_badge(m.health, m.health_evidence, with_evidence=True)
        return (
            f'<tr role="row" data-vm="{name}">{checkbox}'
            f'<td role="cell" class="member-name"><a href="{edit_head}{pk}{edit_tail}">'
            f"{name}</a></td>"
            f'<td role="cell" class="member-status">{badge}'
            f"{self.queued if m.queued else ''}{' ' + health if health else ''}</td>"
            f"{self.rank_cell}{int(m.rank)}</td>"
            f"{self.ip_cell}{escape(m.private_ip or '-')}</td>"
            f"{self.fabric_cell}{escape(m.fabric_address or '-')}</span></td>"
            f"{self.billing_cell}"
            f"{self.billing.get(m.billing_type) or escape(m.billing_type)}</td>"
            f"{self.verdict_cell}{m.verdict}</td>"
            f'<td role="cell" class="row-actions">{actions}</td></tr>'
        )


# Rows kept per process, each under (its frame, what it shows): a tab that polls or is opened
# again draws only the rows that changed (finding a kept row is cheaper than drawing it).
# Whole tables' worth; cleared when full, as ``{% memo %}``'s blocks.
_FRAMES = Kept(most=64)
_ROWS = Kept(most=4096)


def forget_rows() -> None:
    """Drop every row and frame kept: the next tab draws all its rows anew."""
    _FRAMES.clear()
    _ROWS.clear()


def row_frame(cluster, can_update: bool, detach_reasons) -> RowFrame:
    shown = ClusterShown(int(cluster.pk), cluster.name, cluster.status)
    key = (get_language(), get_script_prefix(), shown, can_update, tuple(detach_reasons))
    frame = _FRAMES.get(key)
    if frame is None:
        if len(_FRAMES) >= _FRAMES.most:
            forget_rows()  # rows of a frame no longer kept would never be found again
        frame = _FRAMES[key] = RowFrame(shown, can_update, key[-1])
    return frame


@register.simple_tag
def member_table_rows(members, cluster, controls):
    """The table body: [checkbox] name, status, IPs, billing, start/stop and 분리.

    Each row is one f-string (``RowFrame.row``) whose every value is escaped with the
    standard library's ``html.escape`` (format_html per cell, 6 a row, and Django's
    lazy-aware escape were 40% of the tab's time at 256 members), drawn from what it shows
    (``Shown``) and kept under it. Rows and cells carry their ARIA roles: on a phone they
    are laid out as cards (CSS grid), which must not cost the table its semantics."""
    can_update = controls["can_update_vm"]
    startable, stoppable, detachable = (
        controls["startable"],
        controls["stoppable"],
        controls["detach"],
    )
    frame = row_frame(cluster, can_update, controls.get("detach_reasons", ()))
    verdicts = latest_verdicts(cluster)  # the last 검증 verdict, 교체 on 불량
    # A member the last 검증 did not judge joined after it (an attach, a 교체): said so.
    not_judged = escape(gettext("검증 안 됨"))
    unjudged = f'<span class="muted">{not_judged}</span>' if verdicts else "-"
    waiting = controls.get("queued", set())
    rows = []
    for rank, vm in enumerate(members):  # in rank order (``clusters.launch.RANK_ORDER``)
        pk = vm.pk
        verdict = verdicts.get(pk)
        shown = Shown(
            pk,
            vm.name,
            rank,
            vm.status,
            vm.private_ip or "",
            vm.fabric_address,
            vm.billing_type,
            pk in startable,
            pk in stoppable,
            detachable.get(pk),
            verdict_cell(verdict, vm, cluster, can_update) if verdict is not None else unjudged,
            pk in waiting,
            vm.health,
            vm.health_headline if vm.health != VmHealth.OK else "",
        )
        row = _ROWS.get((frame, shown))
        rows.append(row if row is not None else _ROWS.keep((frame, shown), frame.row(shown)))
    return mark_safe("\n".join(rows))  # noqa: S308 - every value is escaped in RowFrame.row


@register.simple_tag
def member_ssh_blocks(members):
    """How to connect to rank 0, where a user runs ``mpirun`` and ``torchrun``: ``ssh
    vc@<private IP>`` with its 복사 button and the host key fingerprints its agent reported
    (``vms.templatetags.vm_tags.ssh_block``). Every other member's is on its VM page: a block
    per member would make a 256-member tab several times heavier."""
    if not members:
        return ""
    first = members[0]
    keys = shown_host_keys([first.pk])
    return mark_safe(  # noqa: S308 - escaped in ssh_block
        ssh_block(first.pk, first.private_ip, keys.get(first.pk, ()), f"node_rank=0 · {first.name}")
    )
