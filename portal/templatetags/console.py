from django import template

from clusters.models import TRANSITIONAL
from vms.models import VM_TRANSITIONAL

register = template.Library()


@register.inclusion_tag("clusters/_status.html")
def status_badge(obj):
    """A coloured badge with the Korean (or English) status label; spins while in transition."""
    return {
        "status": obj.status,
        "label": obj.get_status_display(),
        "transitional": TRANSITIONAL | VM_TRANSITIONAL,
    }
