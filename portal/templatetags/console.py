"""Tags every console page uses: the status badge and the row-rendering primitives.

Nothing here knows a cluster from a VM: a model tells its status labels (its ``status``
field's choices) and which statuses spin (its ``lifecycle``). Rows live in the app that owns
them (``clusters/templatetags``, ``vms/templatetags``).
"""

from functools import cache, lru_cache

from django import template
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

register = template.Library()

SPINNER = mark_safe('<span class="spinner" aria-hidden="true"></span>')
# A pk no row has: reversed once, then replaced per row (reverse() per row cost ~10 µs × 3).
_PK_SENTINEL = 987654321987


@cache
def _status_labels(model) -> dict:
    # Lazy labels by value, so the active language applies when shown. get_FOO_display()
    # rebuilds and translates every choice on each call: ~10 gettext calls a row.
    return dict(model._meta.get_field("status").choices)


def url_pattern(name: str) -> str:
    """The URL of ``name`` with its pk argument as ``{pk}``, for ``str.format`` per row."""
    return reverse(name, args=[_PK_SENTINEL]).replace(str(_PK_SENTINEL), "{pk}")


@register.simple_tag
def status_badge(obj):
    """A coloured badge with the Korean (or English) status label; spins while in transition.

    A screen reader hears what the colour says: "상태: 실행중" (``role="img"`` so the label
    may name a span; the visible text stays the bare status).
    format_html, not an inclusion tag: it is drawn once per row (256 on a big cluster's
    member tab), where a template render per badge cost a quarter of the page; and made once
    per model, status and language, not per row."""
    return _badge(type(obj), obj.status, translation.get_language())


@lru_cache(maxsize=256)
def _badge(model, status: str, language: str | None) -> SafeString:
    """``status_badge`` of a ``model`` row in ``status``, in ``language`` (the active one)."""
    label = _status_labels(model).get(status, status)
    return format_html(
        '<span class="badge badge-{}" data-status="{}" role="img" aria-label="{}">{}{}</span>',
        status.lower(),
        status,
        gettext("상태: %(status)s") % {"status": label},
        SPINNER if status in model.lifecycle.transitional else "",
        label,
    )


def short_time(moment) -> str:
    """``YYYY-MM-DD HH:MM`` in the portal's time zone: the |date filter costs ~4x per row."""
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M") if moment else "-"


def join_rows(rows) -> str:
    """Rows each made by format_html (so escaped), joined into one safe string."""
    return mark_safe("\n".join(rows))  # noqa: S308 - every row is a SafeString of format_html
