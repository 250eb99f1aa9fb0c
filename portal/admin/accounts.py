"""What project staff see of accounts in the admin, and which lookups its lists answer them:
nothing of another project.

An account is named by its username to a platform admin (superuser) and, for project staff,
when it is one of their projects' (``visible_users``). Any other account (a platform admin who
acted in their project, a former member) is named by its role (``shown_user``) on every page
that names one: the lists and read-only fields (``UserColumn``) and the history pages; and a
search finds no row by its username. A list answers only the lookups it offers
(``offered_lookups``: its filters' own parameters and the date hierarchy's): any other, such
as ``?role_bindings__project=2``, is refused before it runs, with one answer whatever it would
have found (``FilterNotOffered``). ``StaffSight`` does all of it for every admin of the portal.
"""

import logging
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.admin.filters import (
    AllValuesFieldListFilter,
    DateFieldListFilter,
    EmptyFieldListFilter,
    FieldListFilter,
    RelatedFieldListFilter,
)
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.admin.utils import NotRelationField, get_fields_from_path
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import FieldDoesNotExist
from django.db.models import Case, F, Q, QuerySet, Value, When
from django.utils.translation import gettext_lazy as _

from portal.foundation.errors import FilterNotOffered
from portal.models import Project, RoleBinding

# Where Django logs the refusal it would have answered itself.
security_log = logging.getLogger("django.security.DisallowedModelAdminLookup")

PLATFORM_ADMIN = _("플랫폼 관리자")
OUTSIDER = _("외부 사용자")


def visible_users(user) -> QuerySet:
    """The accounts whose username ``user`` may see in the admin (its lists, filters, choices
    and autocompletes): the members of the projects they hold a role in, themselves, and an
    account they added that has no role yet (to bind it next); superusers: every account.
    Who is in another project is that project's business."""
    User = get_user_model()
    if user.is_superuser:
        return User.objects.all()
    members = RoleBinding.objects.filter(project__in=Project.objects.visible_to(user)).values(
        "user_id"
    )
    added = LogEntry.objects.filter(
        user_id=user.pk,
        action_flag=ADDITION,
        content_type=ContentType.objects.get_for_model(User),
    ).values_list("object_id", flat=True)
    unbound = Q(pk__in=[int(pk) for pk in added if pk.isdigit()], is_superuser=False) & ~Q(
        pk__in=RoleBinding.objects.values("user_id")
    )
    return User.objects.filter(Q(pk__in=members) | Q(pk=user.pk) | unbound)


def seen_by(request, user) -> bool:
    """Whether ``request.user`` may see the username of ``user`` (read once a request)."""
    if request.user.is_superuser:
        return True
    ids = getattr(request, "_visible_user_ids", None)
    if ids is None:
        ids = set(visible_users(request.user).values_list("pk", flat=True))
        request._visible_user_ids = ids
    return user.pk in ids


def shown_user(request, user) -> str:
    """How an admin page names ``user`` to ``request.user``: by its username where ``seen_by``,
    else by its role: 플랫폼 관리자 for a superuser, 외부 사용자 for anyone else. No account
    (the system, or one deleted since): "-", the admin's empty value."""
    if user is None:
        return "-"
    if seen_by(request, user):
        return user.get_username()
    return str(PLATFORM_ADMIN if user.is_superuser else OUTSIDER)


def names_account(model, name) -> bool:
    """Whether ``name`` is a field of ``model`` that links to an account."""
    if not isinstance(name, str):
        return False
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        return False
    return field.many_to_one is True and field.related_model is get_user_model()


class UserColumn:
    """A list column or read-only field showing the account in ``field`` as ``shown_user``
    names it for one request. Django finds a read-only field in its lists by equality: two
    are equal for the same request and field."""

    def __init__(self, request, field):
        self.request = request
        self.name = self.__name__ = self.admin_order_field = field.name
        self.short_description = field.verbose_name

    def __call__(self, obj) -> str:
        return shown_user(self.request, getattr(obj, self.name))

    def __eq__(self, other):
        if not isinstance(other, UserColumn):
            return NotImplemented
        return other.request is self.request and other.name == self.name

    def __hash__(self):
        return hash(self.name)


def offered_lookups(model_admin, request) -> set[str]:
    """The query-string lookups a changelist makes itself: its list filters' parameters and
    the date hierarchy's. (Search, ordering, paging and facets are not lookups.)"""
    offered = set()
    if model_admin.date_hierarchy:
        offered |= {f"{model_admin.date_hierarchy}__{part}" for part in ("year", "month", "day")}
    for entry in model_admin.get_list_filter(request):
        if isinstance(entry, type) and issubclass(entry, admin.SimpleListFilter):
            offered.add(str(entry.parameter_name))
        elif isinstance(entry, list | tuple):
            offered |= filter_parameters(model_admin.model, *entry)
        else:
            offered |= filter_parameters(model_admin.model, entry, None)
    return offered


def filter_parameters(model, path, filter_class) -> set[str]:
    """The parameters a field's list filter reads (its ``expected_parameters``), named without
    making one (making one runs its queries)."""
    if isinstance(path, str):
        field = get_fields_from_path(model, path)[-1]
    else:
        field, path = path, path.name
    if filter_class is None:  # the class Django picks for the field (FieldListFilter.create)
        registered = FieldListFilter._field_list_filters  # type: ignore[attr-defined]
        filter_class = next(c for test, c in registered if test(field))
    if issubclass(filter_class, RelatedFieldListFilter):
        target = field.target_field.name  # type: ignore[attr-defined]
        return {f"{path}__{target}__exact", f"{path}__isnull"}
    if issubclass(filter_class, EmptyFieldListFilter):
        return {f"{path}__isempty"}
    if issubclass(filter_class, DateFieldListFilter):
        return {f"{path}__gte", f"{path}__lt", f"{path}__isnull"}
    if issubclass(filter_class, AllValuesFieldListFilter):
        return {path, f"{path}__isnull"}
    return {f"{path}__exact", f"{path}__isnull"}  # booleans and choices


def search_path(field: str) -> tuple[str, str]:
    """A search field's kind of match (``^`` starts with, ``=`` exact, ``@`` full text, or
    none) and its path."""
    path = field.lstrip("^=@")
    return field[: len(field) - len(path)], path


def account_in_path(model, path: str) -> str | None:
    """The part of a search path (``actor__username``) that reaches an account (``actor``)."""
    parts = path.split("__")
    for end in range(1, len(parts)):
        try:
            field = get_fields_from_path(model, "__".join(parts[:end]))[-1]
        except (FieldDoesNotExist, NotRelationField):
            return None
        if field.is_relation and field.related_model is get_user_model():
            return "__".join(parts[:end])
    return None


def seen_alias(path: str) -> str:
    """What project staff search instead of an account's ``path``: the username (or other
    value) where the page shows it, "" elsewhere (``StaffSight.get_search_results``)."""
    return "seen_" + path.replace("__", "_")


if TYPE_CHECKING:  # what StaffSight is mixed into: its super() calls are ModelAdmin's
    _ModelAdmin = admin.ModelAdmin[Any]
else:
    _ModelAdmin = object


class StaffSight(_ModelAdmin):
    """What every admin of the portal shows project staff of accounts, and which lookups it
    answers them (the module's docstring). A superuser sees what Django shows."""

    def lookup_allowed(self, lookup, value, request=None):
        """Project staff: only the lookups the list makes itself. Django's own rule also takes
        any lookup on the row's fields or one relation away (``created_by__username__gt``)
        and any spelling of a filtered relation (``role_bindings__project=2``), which the
        filter's own checks never see."""
        if request is not None and request.user.is_superuser:
            return super().lookup_allowed(lookup, value, request)
        return request is not None and lookup in offered_lookups(self, request)

    def changelist_view(self, request, extra_context=None):
        """A lookup the list does not offer gets its refusal in the reader's words (Django
        answers a bare "Bad Request")."""
        try:
            return super().changelist_view(request, extra_context)
        except DisallowedModelAdminLookup as exc:
            security_log.warning("%s", exc, extra={"status_code": 400, "request": request})
            raise FilterNotOffered() from None

    def _named(self, request, fields, only=None):
        """``fields`` with each account field (of ``only``, if given) as a ``UserColumn``."""
        if request.user.is_superuser:
            return fields
        return [
            self._named(request, name, only)
            if isinstance(name, list | tuple)
            else UserColumn(request, self.model._meta.get_field(name))
            if names_account(self.model, name) and (only is None or name in only)
            else name
            for name in fields
        ]

    def _readonly_accounts(self, request, obj) -> set[str]:
        shown = self.get_readonly_fields(request, obj)
        return {field.name for field in shown if isinstance(field, UserColumn)}

    def get_list_display(self, request):
        return self._named(request, super().get_list_display(request))

    def get_readonly_fields(self, request, obj=None):
        return self._named(request, super().get_readonly_fields(request, obj))

    def get_fieldsets(self, request, obj=None):
        """An account field shown read-only (every field of a page the user may only view)
        is its ``UserColumn``; one the user edits stays a form field (its choices are
        ``visible_users``)."""
        fieldsets = super().get_fieldsets(request, obj)
        view_only = obj is not None and not self.has_change_permission(request, obj)
        only = None if view_only else self._readonly_accounts(request, obj)
        return [
            (name, {**options, "fields": self._named(request, options["fields"], only)})
            for name, options in fieldsets
        ]

    def get_exclude(self, request, obj=None):
        """An account field shown as its ``UserColumn`` is no field of the form."""
        exclude = super().get_exclude(request, obj)
        accounts = [] if request.user.is_superuser else self._readonly_accounts(request, obj)
        return [*(exclude or ()), *accounts] if accounts else exclude

    def get_search_fields(self, request):
        fields = super().get_search_fields(request)
        if request.user.is_superuser:
            return fields
        shown = []
        for field in fields:
            match, path = search_path(field)
            shown.append(match + seen_alias(path) if account_in_path(self.model, path) else field)
        return shown

    def get_search_results(self, request, queryset, search_term):
        """A search by an account's username (``actor__username``) matches only the accounts
        whose username the page shows: staff cannot spell out anyone else's by searching."""
        if search_term and not request.user.is_superuser:
            seen = visible_users(request.user)
            for _match, path in map(search_path, super().get_search_fields(request)):
                account = account_in_path(self.model, path)
                if account is not None:
                    value = Case(When(**{f"{account}__in": seen}, then=F(path)), default=Value(""))
                    queryset = queryset.alias(**{seen_alias(path): value})
        return super().get_search_results(request, queryset, search_term)

    def history_view(self, request, object_id, extra_context=None):
        """Each change's author as ``shown_user`` names them. The page shows an entry's
        ``user``: one not ``seen_by`` the reader is replaced, on the page only, by an unsaved
        account bearing the name."""
        response = super().history_view(request, object_id, extra_context)
        page = (getattr(response, "context_data", None) or {}).get("action_list")
        if page is None or request.user.is_superuser:
            return response
        entries = list(page.object_list)
        for entry in entries:
            if not seen_by(request, entry.user):
                entry.user = get_user_model()(username=shown_user(request, entry.user))
        page.object_list = entries
        return response
