"""The cluster list's rows, rendered in Python (the member tab's are in ``member_table``).

A project may have thousands of clusters: the template engine's per-variable cost (resolve,
escape, lazy checks: ~19 per row) made a list of rows several times the floor view
(bench_pages). format_html escapes every value.
"""

from django import template
from django.utils.html import format_html

from portal.templatetags.console import join_rows, short_time, status_badge, url_pattern
from vms.models import FabricType

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
