"""Tags every console page uses: the status badge and the row-rendering primitives.

Nothing here knows a cluster from a VM: a model tells its status labels (its ``status``
field's choices) and which statuses spin (its ``lifecycle``). Rows live in the app that owns
them (``clusters/templatetags``, ``vms/templatetags``).
"""

import itertools
from functools import cache, lru_cache
from html import escape

from django import forms, template
from django.conf import settings
from django.templatetags.static import static
from django.urls import get_script_prefix, reverse
from django.utils import timezone, translation
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext
from django_htmx.jinja import django_htmx_script

from portal.speed.kept import Kept

register = template.Library()

SPINNER = mark_safe('<span class="spinner" aria-hidden="true"></span>')
# A pk no row has: reversed once, then replaced per row (cheaper than reverse() per row).
_PK_SENTINEL = 987654321987


@cache
def _status_labels(model) -> dict:
    # Lazy labels by value, so the active language applies when shown. get_FOO_display()
    # rebuilds and translates every choice on each call: ~10 gettext calls a row.
    return dict(model._meta.get_field("status").choices)


def url_pattern(name: str) -> str:
    """The URL of ``name`` with its pk argument as ``{pk}``, for ``str.format`` per row."""
    return _url_pattern(name, get_script_prefix())


@lru_cache(maxsize=256)
def _url_pattern(name: str, _prefix: str) -> str:
    return reverse(name, args=[_PK_SENTINEL]).replace(str(_PK_SENTINEL), "{pk}")


@register.filter
def pk_url(pk, name: str) -> str:
    """``{{ cluster.pk|pk_url:"clusters:cluster_start" }}``: ``{% url name pk %}`` from the
    name's pattern, reversed once per process (a detail page names 20-odd URLs of its
    cluster; each ``{% url %}`` resolved and reversed anew)."""
    return url_pattern(name).format(pk=int(pk))


@register.simple_tag
def status_badge(obj):
    """A coloured badge with the Korean (or English) status label; spins while in transition.

    A screen reader hears what the colour says: "상태: 실행중" (``role="img"`` so the label
    may name a span; the visible text stays the bare status).
    format_html, not an inclusion tag: it is drawn once per row (256 on a big cluster's
    member tab), where a template render per badge cost a quarter of the page; and made once
    per model, status and language, not per row."""
    return badge_of(type(obj), obj.status)


def badge_of(model, status: str) -> SafeString:
    """``status_badge`` of a ``model`` row in ``status``, where the page holds no row."""
    return _badge(model, status, translation.get_language())


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


@register.filter
def short_time(moment, zone=None) -> str:
    """``YYYY-MM-DD HH:MM`` in the portal's time zone: the |date filter costs ~4x per row.
    A caller formatting many rows reads the active ``zone`` once and passes it: reading it
    (a context-local lookup) cost as much as the formatting."""
    if not moment:
        return "-"
    local = timezone.localtime(moment, zone)
    return f"{local.year:04d}-{local.month:02d}-{local.day:02d} {local.hour:02d}:{local.minute:02d}"


SORT_MARKS = {"ascending": "▲", "descending": "▼"}


@register.simple_tag(takes_context=True)
def list_head(context, form, columns, target):
    """A list's header row from its filter form's ``HEADERS``: a sortable column (one in
    ``SORTS``) is a link that sorts by it, keeping the filters, its state in ``aria-sort``;
    the others are plain headers. Drawn here: an include per column was a sixth of the list."""
    path = context["request"].path
    cells = []
    for key, label, css in form.HEADERS:
        label, css_attr = escape(str(label)), f' class="{css}"' if css else ""
        column = columns.get(key)
        if css == "visually-hidden":
            cells.append(f'<th scope="col"><span class="visually-hidden">{label}</span></th>')
        elif column is None:
            cells.append(f'<th scope="col"{css_attr}>{label}</th>')
        else:
            url, aria = escape(f"{path}?{column['query']}"), column["aria"]
            sorted_attr = f' aria-sort="{aria}"' if aria != "none" else ""
            cells.append(
                f'<th scope="col"{sorted_attr}{css_attr}><a class="sort-link" href="{url}"'
                f' hx-get="{url}" hx-target="{escape(target)}" hx-swap="outerHTML"'
                f' hx-push-url="true">{label}<span class="sort-mark" aria-hidden="true">'
                f"{SORT_MARKS.get(aria, '↕')}</span></a></th>"
            )
    return mark_safe(f"<thead><tr>{''.join(cells)}</tr></thead>")  # noqa: S308 - escaped above


@register.simple_tag
def filter_fields(form):
    """A list's filter fields, each a label and its control (a ``<select>``, or a text box),
    drawn here with the standard library's ``html.escape``: Django's widget templates were a
    fifth of the list page. A catalog field the form lists in ``listed_choices`` has its
    choices from the form's ``listed``: rows of a statement compiled ahead (a
    ModelChoiceField iterates a server-side cursor: three round trips), kept per process."""
    return mark_safe(  # noqa: S308 - every value is escaped in _control
        "".join(
            f'<div class="field-inline"><label for="{escape(bound.id_for_label)}">'
            f"{escape(str(bound.label))}</label>{_control(bound)}</div>"
            for bound in form
        )
    )


def _control(bound) -> str:
    field, value = bound.field, bound.value()
    shown = "" if value is None else str(value)
    name, control_id = escape(bound.html_name), escape(bound.id_for_label)
    if not isinstance(field.widget, forms.Select):
        value_attr = f' value="{escape(shown)}"' if shown else ""
        length = f' maxlength="{int(field.max_length)}"' if field.max_length else ""
        return f'<input type="text" name="{name}" id="{control_id}"{value_attr}{length}>'
    if bound.name in getattr(bound.form, "listed_choices", {}):
        choices = [("", field.empty_label or ""), *bound.form.listed(bound.name)]
    elif isinstance(field, forms.ModelChoiceField):
        choices = [("", field.empty_label or "")]
        choices += [(obj.pk, field.label_from_instance(obj)) for obj in list(field.queryset or ())]
    else:
        choices = field.choices
    options = "".join(
        f'<option value="{escape(str(key))}"{" selected" if str(key) == shown else ""}>'
        f"{escape(str(text))}</option>"
        for key, text in choices
    )
    return f'<select name="{name}" id="{control_id}">{options}</select>'


def row_form(form_id: str, token, fields: str = "") -> SafeString:
    """A table's one hidden form, which its rows' buttons submit through (``form`` and
    ``formaction``): the CSRF token, and ``fields`` (already escaped), once for all rows."""
    return SafeString(
        f'<form id="{escape(form_id)}" method="post" hidden>{csrf_input(token)}{fields}</form>'
    )


def csrf_input(token) -> str:
    """The hidden CSRF field of a form drawn in Python, as ``{% csrf_token %}`` draws it
    (nothing where the request has no token)."""
    if not token or str(token) == "NOTPROVIDED":
        return ""
    return f'<input type="hidden" name="csrfmiddlewaretoken" value="{escape(str(token))}">'


@register.simple_tag(takes_context=True)
def topbar(context):
    """The top bar of every page: the brand, the project switcher (signed in, with projects),
    the language switch, and who is signed in with their API tokens and 로그아웃. Drawn here
    like the rows, every value escaped: through the template engine its three CSRF inputs,
    two ``next`` paths, five URLs and the projects' loop were a tenth of the detail page."""
    request, user = context.get("request"), context.get("user")
    signed_in = user is not None and user.is_authenticated
    csrf = csrf_input(context.get("csrf_token"))
    here = escape(request.get_full_path()) if request is not None else ""
    back = f'{csrf}<input type="hidden" name="next" value="{here}">'
    # Outside the f-strings, where makemessages finds them.
    words = {
        "brand": gettext("GPU 클라우드"),
        "project": gettext("프로젝트"),
        "go": gettext("이동"),
        "tokens": gettext("API 토큰"),
        "keys": gettext("SSH 키"),
        "webhooks": gettext("웹훅"),
        "logout": gettext("로그아웃"),
    }
    brand, project, go, tokens, keys, webhooks, logout = (escape(words[k]) for k in words)
    switch = ""
    if signed_in and (projects := context.get("projects")):
        current = getattr(context.get("current_project"), "pk", None)
        options = "".join(
            f'<option value="{int(p.pk)}"{" selected" if p.pk == current else ""}>'
            f"{escape(p.name)}</option>"
            for p in projects
        )
        switch = (
            f'<form class="project-switch" method="post" action="{_url("switch_project")}">'
            f'{back}<label for="project-select">{project}</label>'
            f'<select id="project-select" name="project" data-autosubmit>{options}</select>'
            f'<noscript><button type="submit" class="btn btn-small">{go}'
            f"</button></noscript></form>"
        )
    language = _OTHER_LANGUAGE["en" if translation.get_language() == "ko" else "ko"]
    who = ""
    if signed_in:
        who = (
            f'<span class="whoami">{escape(user.get_username())}</span>'
            f'<a href="{_url("api_tokens")}">{tokens}</a>'
            f'<a href="{_url("ssh_keys")}">{keys}</a>'
            f'<a href="{_url("webhooks")}">{webhooks}</a>'
            f'<form method="post" action="{_url("logout")}">{csrf}'
            f'<button type="submit" class="link-button">{logout}'
            f"</button></form>"
        )
    return SafeString(
        f'<header class="topbar"><a class="brand" href="{_url("home")}">'
        f"{brand}</a>{switch}"
        f'<div class="topbar-right"><form class="lang-switch" method="post"'
        f' action="{_url("set_language")}">{back}{language}</form>{who}</div></header>'
    )


# The language switch offers the other language, named in itself.
_OTHER_LANGUAGE = {
    code: f'<button type="submit" name="language" value="{code}" class="link-button"'
    f' lang="{code}">{name}</button>'
    for code, name in (("en", "English"), ("ko", "한국어"))
}


def _url(name: str) -> str:
    """A URL without arguments, escaped, reversed once per process and script prefix."""
    return _fixed_url(name, get_script_prefix())


@lru_cache(maxsize=64)
def _fixed_url(name: str, _prefix: str) -> str:
    return escape(reverse(name))


# What every page's head loads, by their static paths: htmx (django-htmx's copy), then ours.
HEAD_SCRIPTS = ("django_htmx/htmx-2.min.js", "portal/console.js", "portal/dialogs.js")
STYLESHEET = "portal/console.css"
FAVICON = "portal/favicon.svg"


@register.simple_tag(takes_context=True)
def head_assets(context) -> SafeString:
    """The icon, the stylesheet and the scripts of every page's head, each script deferred
    and with the request's CSP nonce, htmx first. Their static URLs are looked up once per
    process (``_static_url``): through the template engine (three ``{% static %}``,
    ``{% htmx_script %}``) they were a twentieth of the detail page. In DEBUG,
    django-htmx's script that shows error pages comes too."""
    htmx, *ours = (deferred_script(context, path) for path in HEAD_SCRIPTS)
    head = [
        f'<link rel="icon" href="{_static_url(FAVICON)}" type="image/svg+xml">',
        f'<link rel="stylesheet" href="{_static_url(STYLESHEET)}">',
        htmx,
    ]
    if settings.DEBUG:
        head.append(django_htmx_script(nonce=context.get("csp_nonce")))
    return mark_safe("\n  ".join([*head, *ours]))  # noqa: S308 - escaped in _static_url


@register.simple_tag(takes_context=True)
def deferred_script(context, path: str) -> SafeString:
    """``<script src="{% static path %}" nonce="…" defer>``, its URL looked up once."""
    url = _static_url(path)
    return mark_safe(f'<script src="{url}"{_nonce_attr(context)} defer></script>')  # noqa: S308


def _nonce_attr(context) -> str:
    # django-csp's nonce is lazy, and false until read: it is made (and sent in the
    # header) only once a page reads it.
    lazy = context.get("csp_nonce")
    nonce = "" if lazy is None else str(lazy)
    return f' nonce="{escape(nonce)}"' if nonce else ""


@lru_cache(maxsize=64)
def _static_url(path: str) -> str:
    """A static file's URL, escaped: fixed for a process's life, as ``static()`` makes it
    (Django reads ``STATIC_URL`` with the script prefix once; the manifest of hashed names
    is read when the process starts)."""
    return escape(static(path))


# Rendered ``{% memo %}`` blocks by (block, language, keys).
_MEMO = Kept(most=512)
# Each compiled block's own number: an id() could be reused by a block compiled after a
# template reload and read another block's output.
_BLOCKS = itertools.count()


class MemoNode(template.Node):
    def __init__(self, nodelist, keys):
        self.nodelist, self.keys, self.block = nodelist, keys, next(_BLOCKS)

    def render(self, context):
        key = (self.block, translation.get_language(), *(k.resolve(context) for k in self.keys))
        rendered = _MEMO.get(key)
        if rendered is None:
            rendered = _MEMO.keep(key, self.nodelist.render(context))
        return rendered


@register.tag
def memo(parser, token):
    """``{% memo key1 key2 %}…{% endmemo %}``: the block rendered once per process for each
    language and value of the keys, then reused. For the console's fixed parts (the menu, the
    dialog's labels): the block must depend on nothing but its keys and the language — never
    on the user's data, a token or a nonce. A menu of 12 links cost a tenth of a list page."""
    keys = [parser.compile_filter(bit) for bit in token.split_contents()[1:]]
    nodelist = parser.parse(("endmemo",))
    parser.delete_first_token()
    return MemoNode(nodelist, keys)
