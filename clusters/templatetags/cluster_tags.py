"""The cluster list's rows and the 정보 tab's torchrun lines, rendered in Python (the member
tab's rows are in ``member_table``).

A project may have thousands of clusters: the template engine's per-variable cost (resolve,
escape, lazy checks: ~19 per row) made a list of rows several times the floor view
(bench_pages).
"""

from html import escape

from django import template
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.utils.translation import gettext

from portal.catalog.models import FabricType
from portal.templatetags.console import short_time, status_badge, url_pattern

register = template.Library()
FABRIC_LABELS = dict(FabricType.choices)


@register.simple_tag
def cluster_rows(clusters):
    """The cluster list's table body (name, status, fabric, type, zone, members, created);
    ``clusters`` come annotated with ``member_count``, ``zone_code`` and ``type_code``.
    One f-string a row, every value escaped with ``html.escape`` (format_html's lazy-aware
    escaping of eight values a row was half the rows' cost)."""
    detail = url_pattern("clusters:cluster_detail")
    zone = timezone.get_current_timezone()
    # Each value's column name, which a phone shows beside it (the rows are cards there).
    labels = {
        key: escape(gettext(text))
        for key, text in (
            ("fabric", "패브릭 타입"),
            ("type", "인스턴스 유형"),
            ("zone", "가용 영역"),
            ("members", "멤버"),
            ("created", "생성일"),
        )
    }
    rows = [_cluster_row(c, detail, zone, labels) for c in clusters]
    return mark_safe("\n".join(rows))  # noqa: S308 - every value is escaped in _cluster_row


def _cluster_row(c, detail: str, zone, label: dict) -> str:
    fabric = FABRIC_LABELS.get(c.fabric_type)
    return (
        f'<tr><td><a href="{detail.format(pk=int(c.pk))}">{escape(c.name)}</a></td>'
        f"<td>{status_badge(c)}</td>"
        f'<td data-label="{label["fabric"]}">{escape(str(fabric or c.fabric_type))}</td>'
        f'<td data-label="{label["type"]}">{escape(c.type_code)}</td>'
        f'<td data-label="{label["zone"]}">{escape(c.zone_code)}</td>'
        f'<td class="num" data-label="{label["members"]}">{int(c.member_count)}</td>'
        f'<td data-label="{label["created"]}">{short_time(c.created_at, zone)}</td></tr>'
    )


@register.simple_tag
def torchrun_blocks(commands):
    """The 정보 tab's torchrun line per member, each with its 복사 button: one f-string a
    member, every value escaped (a template loop costs more per member)."""
    copy = escape(gettext("복사"))
    blocks = []
    for rank, command in enumerate(commands):
        blocks.append(
            f'<div class="code-block">\n'
            f'    <div class="code-head"><span class="code-label">node_rank={rank} · '
            f"{escape(command['vm'].name)}</span>"
            f'<button type="button" class="btn btn-small copy" data-copy="#torchrun-{rank}">'
            f"{copy}</button></div>\n"
            f'    <pre class="code"><code id="torchrun-{rank}">'
            f"{escape(command['line'])}</code></pre>\n"
            f"  </div>"
        )
    return mark_safe("\n  ".join(blocks))  # noqa: S308 - every value above is escaped
