from django import template
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext

from clusters.models import TRANSITIONAL, ClusterStatus
from vms.models import VM_TRANSITIONAL, BillingType, FabricType, VmStatus

register = template.Library()


SPINNER = mark_safe('<span class="spinner" aria-hidden="true"></span>')
ANY_TRANSITIONAL = TRANSITIONAL | VM_TRANSITIONAL
# Labels by value, lazy so the active language applies. get_FOO_display() rebuilds a dict of
# every choice on each call and translates them all to hash them: ~10 gettext calls a row.
STATUS_LABELS = {
    "virtualcluster": dict(ClusterStatus.choices),
    "virtualmachine": dict(VmStatus.choices),
}
BILLING_LABELS = dict(BillingType.choices)
FABRIC_LABELS = dict(FabricType.choices)


@register.simple_tag
def status_badge(obj):
    """A coloured badge with the Korean (or English) status label; spins while in transition.

    format_html, not an inclusion tag: it is drawn once per row (256 on a big cluster's
    member tab), where a template render per badge cost a quarter of the page."""
    status = obj.status
    labels = STATUS_LABELS.get(obj._meta.model_name, {})
    return format_html(
        '<span class="badge badge-{}" data-status="{}">{}{}</span>',
        status.lower(),
        status,
        SPINNER if status in ANY_TRANSITIONAL else "",
        labels.get(status, status),
    )


@register.simple_tag
def billing_label(vm):
    return BILLING_LABELS.get(vm.billing_type, vm.billing_type)


def short_time(moment):
    """``YYYY-MM-DD HH:MM`` in the portal's time zone: the |date filter costs ~4x per row."""
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M") if moment else "-"


@register.simple_tag
def cluster_rows(clusters):
    """The cluster list's table body (name, status, fabric, type, zone, members, created).

    Python for the reason given at ``member_rows``; ``clusters`` come annotated with
    ``member_count``, ``zone_code`` and ``type_code`` by the list view.
    """
    clusters_url = reverse("clusters:cluster_list")
    return mark_safe(  # noqa: S308 - every interpolated value is escaped
        "\n".join(
            f'<tr><td><a href="{clusters_url}{c.pk}/">{escape(c.name)}</a></td>'
            f"<td>{status_badge(c)}</td>"
            f"<td>{escape(FABRIC_LABELS.get(c.fabric_type, c.fabric_type))}</td>"
            f"<td>{escape(c.type_code)}</td><td>{escape(c.zone_code)}</td>"
            f'<td class="num">{int(c.member_count)}</td>'
            f"<td>{short_time(c.created_at)}</td></tr>"
            for c in clusters
        )
    )


@register.simple_tag(takes_context=True)
def member_rows(context, members, cluster, can_update):
    """The Connected VMs table body.

    Python, not a template loop: a cluster may have hundreds of members, and the template
    engine's per-variable cost (resolve, escape, lazy checks: ~19 per row) made this tab
    8-15x the floor view (bench_pages). Same markup as a template would give; every value
    is escaped here.
    """
    vms_url = reverse("vms:vm_list")
    csrf = escape(str(context.get("csrf_token", "")))
    csrf_input = f'<input type="hidden" name="csrfmiddlewaretoken" value="{csrf}">'
    start_label, stop_label = escape(gettext("시작")), escape(gettext("중지"))
    start_refused = escape(gettext("클러스터가 실행중일 때만 멤버 가상머신을 시작할 수 있습니다"))
    stop_confirm = escape(gettext("가상머신을 중지하시겠습니까?"))
    disabled = (
        "" if cluster.status == ClusterStatus.RUNNING else (f' disabled title="{start_refused}"')
    )
    rows = []
    for vm in members:
        url = f"{vms_url}{vm.pk}/"
        action = ""
        if can_update and vm.status == VmStatus.STOPPED:
            action = (
                f'<form method="post" action="{url}start/" hx-post="{url}start/" hx-swap="none">'
                f'{csrf_input}<button type="submit" class="btn btn-small"{disabled}>'
                f"{start_label}</button></form>"
            )
        elif can_update and vm.status in (VmStatus.RUNNING, VmStatus.ERROR):
            action = (
                f'<form method="post" action="{url}stop/" hx-post="{url}stop/" hx-swap="none" '
                f'hx-confirm="{stop_confirm}">{csrf_input}'
                f'<button type="submit" class="btn btn-small">{stop_label}</button></form>'
            )
        name = escape(vm.name)
        rows.append(
            f'<tr data-vm="{name}"><td><a href="{url}">{name}</a></td>'
            f"<td>{status_badge(vm)}</td>"
            f"<td>{escape(vm.private_ip or '-')}</td>"
            f'<td class="mono">{escape(vm.fabric_address or "-")}</td>'
            f"<td>{escape(billing_label(vm))}</td>"
            f'<td class="row-actions">{action}</td></tr>'
        )
    return mark_safe("\n".join(rows))  # noqa: S308 - every interpolated value is escaped above
