"""Tenancy and access: projects, roles made of permission strings (docs/rules.md#permissions),
bindings, audit."""

from typing import Any, Self, TypeVar

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from portal.foundation.errors import NotFound, RuleViolation
from portal.foundation.errors.ssh_keys import SshKeyNotFound
from portal.foundation.event_text import action_label, render_message
from portal.foundation.kernel import parse_id
from portal.iam.permissions import Perm
from portal.speed.statements import statements


def validate_permissions(value):
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ValidationError(_("권한 목록이 올바르지 않습니다."))
    unknown = sorted(set(value) - {p.value for p in Perm})
    if unknown:
        raise ValidationError(_("알 수 없는 권한: %(names)s") % {"names": ", ".join(unknown)})


def user_reference(verbose_name, **options):
    """Who made or did something: the record outlives the user (the reference becomes None
    when the account is deleted) and gives the user no reverse accessor."""
    field = {
        "null": True,
        "blank": True,
        "on_delete": models.SET_NULL,
        "related_name": "+",
        "verbose_name": verbose_name,
    }
    return models.ForeignKey(settings.AUTH_USER_MODEL, **(field | options))


def reference_to(model, verbose_name):
    """A factory of links to ``model``, all labelled ``verbose_name`` (what the admin, a form
    or an error calls the row linked to). Each link says what deleting that row does
    (``on_delete``) and what the row calls its links back (``related_name``);
    ``one_to_one``: at most one row links to each."""

    def reference(on_delete, related_name=None, *, one_to_one=False, **options):
        field = models.OneToOneField if one_to_one else models.ForeignKey
        return field(
            model,
            on_delete=on_delete,
            related_name=related_name,
            verbose_name=verbose_name,
            **options,
        )

    return reference


# Whose a row is (a role binding, an API token), unlike ``user_reference``'s who did it.
owner_reference = reference_to(settings.AUTH_USER_MODEL, _("사용자"))


class ProjectQuerySet(models.QuerySet["Project"]):
    def visible_to(self, user: Any) -> Self:
        """Projects where the user holds any role (superusers: all)."""
        if not user.is_authenticated or not user.is_active:
            return self.none()
        if user.is_superuser:
            return self
        return self.filter(pk__in=list(project_permissions(user)))


class Project(models.Model):
    slug = models.SlugField(_("식별자"), max_length=63, unique=True)
    name = models.CharField(_("이름"), max_length=100)
    created_at = models.DateTimeField(_("생성일"), auto_now_add=True)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        verbose_name = verbose_name_plural = _("프로젝트")

    def __str__(self):
        return self.name


# The project a row belongs to: what ``ProjectScopedQuerySet.restrict`` filters on.
project_reference = reference_to(Project, _("프로젝트"))


class Role(models.Model):
    name = models.CharField(_("이름"), max_length=63, unique=True)
    description = models.CharField(_("설명"), max_length=200, blank=True)
    permissions = models.JSONField(_("권한"), default=list, validators=[validate_permissions])

    class Meta:
        ordering = ["name"]
        verbose_name = verbose_name_plural = _("역할")

    def __str__(self):
        return self.name


class RoleBinding(models.Model):
    user = owner_reference(models.CASCADE, "role_bindings")
    project = project_reference(models.CASCADE, "bindings")
    role = models.ForeignKey(
        Role, on_delete=models.PROTECT, related_name="bindings", verbose_name=_("역할")
    )

    class Meta:
        verbose_name = verbose_name_plural = _("역할 바인딩")
        constraints = [
            models.UniqueConstraint(fields=["user", "project"], name="one_role_per_user_project")
        ]

    def __str__(self):
        return f"{self.user} @ {self.project}: {self.role}"


def project_permissions(user):
    """{project_id: frozenset(permission strings)} for ``user``, cached on the user object."""
    cached = getattr(user, "_project_permissions", None)
    if cached is None:
        cached = {
            project_id: frozenset(perms)
            for project_id, perms in RoleBinding.objects.filter(user_id=user.pk).values_list(
                "project_id", "role__permissions"
            )
        }
        user._project_permissions = cached
    return cached


def permitted_projects(user, permission) -> list[int] | None:
    """The projects where ``user``'s role grants ``permission``; None: every project (the
    system, ``user=None``, and superusers)."""
    if user is None:
        return None
    if not user.is_authenticated or not user.is_active:
        return []
    if user.is_superuser:
        return None
    return [pid for pid, perms in project_permissions(user).items() if permission in perms]


_M = TypeVar("_M", bound=models.Model)


class ProjectScopedQuerySet(models.QuerySet[_M]):
    """Rows of a project, read as NetBox reads them: ``restrict(user, permission)`` keeps the
    rows the user's role lets them see, and ``readable(user, permission, Model)`` is the one
    "readable or not found" lookup every page, API call, operation and lock goes through."""

    # What a lookup outside the readable rows raises (a 404 in the user's language).
    not_found: type[RuleViolation] = NotFound
    # (user, permission) of ``readable``, carried through every clone for ``shows``.
    _reader: tuple | None = None

    def _clone(self) -> Self:
        clone: Self = super()._clone()  # type: ignore[misc]  # Django's, not in the stubs
        clone._reader = self._reader
        return clone

    def restrict(self, user: Any, permission: str) -> Self:
        """Only the rows in projects where ``user``'s role grants ``permission``."""
        if user is None:
            raise TypeError("restrict() needs a user; readable() takes the system (None)")
        return self.within(permitted_projects(user, permission))

    def within(self, projects: Any) -> Self:
        """Only the rows of ``projects`` (ids); None: every project."""
        return self if projects is None else self.filter(project_id__in=projects)

    def findable(self) -> Self:
        """The rows a lookup may find at all (a model hides its deleted rows here)."""
        return self

    def is_findable(self, obj: _M) -> bool:
        """``findable`` for a row already in hand."""
        return True

    def readable(self, user: Any, permission: str) -> Self:
        """The findable rows ``user`` may read through ``permission`` (``None``: the system,
        which reads everything), remembering who reads for ``shows``."""
        rows = self.findable()
        rows = rows if user is None else rows.restrict(user, permission)
        rows._reader = (user, permission)
        return rows

    def get_or_404(self, pk: Any) -> _M:
        """The row ``pk`` among these, or the model's typed not-found error (an id that cannot
        name a row is not found either, never a DataError)."""
        pk = parse_id(pk)
        found = self.filter(pk=pk).first() if pk is not None else None
        if found is None:
            raise self.not_found()
        return found

    def shown(self, objs: Any) -> list:
        """The rows of ``objs`` (read in a batch) that ``shows`` keeps, the reader's projects
        asked once for all of them."""
        if self._reader is None:
            raise TypeError("shown() answers for readable(user, permission, Model) only")
        user, permission = self._reader
        return shown_to(user, permission, self.model, objs)

    def shows(self, obj: Any) -> bool:
        """Whether ``get_or_404`` would find ``obj``, a row already in hand (read in a batch
        by id): findable, and in a project the reader may read."""
        if self._reader is None:
            raise TypeError("shows() answers for readable(user, permission, Model) only")
        if obj is None or not self.is_findable(obj):
            return False
        user, permission = self._reader
        allowed = permitted_projects(user, permission)
        return allowed is None or obj.project_id in allowed


def light_instances(rows: models.QuerySet, fields: tuple[str, ...]) -> list:
    """``rows`` as model instances that hold ``fields`` (attribute names) and defer the rest,
    as ``only(*fields)`` gives, built from one ``values_list`` without ``Model.__init__``:
    a fraction of what constructing each model costs. No post_init signal is sent (no model
    here listens to one)."""
    return instances_of(rows.model, rows.db, fields, rows.values_list(*fields))


def instances_of(model: type[models.Model], db: str, fields: tuple[str, ...], rows) -> list:
    """``light_instances`` from rows already read (tuples in ``fields`` order)."""
    built = []
    for values in rows:
        obj = object.__new__(model)
        obj.__dict__.update(zip(fields, values, strict=True))
        obj._state = models.base.ModelState()
        obj._state.adding, obj._state.db = False, db
        built.append(obj)
    return built


def readable(user: Any, permission: str, model: type[_M]) -> ProjectScopedQuerySet[_M]:
    """``model``'s rows ``user`` may read through ``permission``: ``.get_or_404(pk)`` finds
    one or raises the model's not-found error; ``.shows(obj)`` asks the same of a row in hand."""
    rows: ProjectScopedQuerySet[_M] = model.objects.readable(user, permission)  # type: ignore[attr-defined]
    return rows


def shown_to(user: Any, permission: str, model: Any, objs) -> list:
    """``readable(user, permission, model).shown(objs)``, without a queryset to build: the
    rows of ``objs`` that are findable and in a project the reader may read."""
    allowed = permitted_projects(user, permission)
    # The queryset's method, bound once: the manager's proxy builds a queryset per call.
    findable = model.objects.get_queryset().is_findable
    return [obj for obj in objs if findable(obj) and (allowed is None or obj.project_id in allowed)]


def readable_row(user: Any, permission: str, model: Any, pk: Any, widen: Any = None) -> Any:
    """The row ``readable(user, permission, model).get_or_404(pk)`` finds, or None: the
    same rule (findable, in a project the reader may read), read through a statement
    compiled once per shape (``portal.speed.statements``), as every cluster page starts with it.
    ``widen`` is a module-level function of the queryset (``select_related``, annotations)."""
    pk = parse_id(pk)
    if pk is None:
        return None
    projects = permitted_projects(user, permission)
    found = statements.instances(
        _readable_row, (model, widen), projects=None if projects is None else tuple(projects), pk=pk
    )
    return found[0] if found else None


def _readable_row(shape: tuple, projects: tuple | None, pk: int) -> models.QuerySet:
    model, widen = shape
    rows = model.objects.findable().within(projects).filter(pk=pk)
    return rows if widen is None else widen(rows)


class LastErrorMixin(models.Model):
    """Why the last background step failed, kept as a code and its params (never as words):
    ``last_error`` gives it back as the typed error, rendered in the reader's language."""

    error_code = models.CharField(_("마지막 오류 코드"), max_length=40, blank=True)
    error_params = models.JSONField(_("마지막 오류 인자"), default=dict, blank=True)

    class Meta:
        abstract = True

    @property
    @admin.display(description=_("마지막 오류"))
    def last_error(self) -> RuleViolation | None:
        if not self.error_code:
            return None
        return RuleViolation.from_stored(self.error_code, self.error_params)

    def set_error(self, error: RuleViolation | None) -> None:
        stored = error.stored() if error is not None else {"code": "", "params": {}}
        self.error_code = stored["code"]
        self.error_params = stored["params"]


class AuditEvent(models.Model):
    class Outcome(models.TextChoices):
        SUCCEEDED = "SUCCEEDED", _("성공")
        REFUSED = "REFUSED", _("거부")
        FAILED = "FAILED", _("실패")

    project = project_reference(models.PROTECT, "audit_events", null=True, blank=True)
    actor = user_reference(_("수행자"), related_name=None)
    action = models.CharField(_("작업"), max_length=40, db_index=True)
    target_type = models.CharField(_("대상 유형"), max_length=40)
    target_id = models.BigIntegerField(_("대상 ID"), null=True, blank=True)
    target_name = models.CharField(_("대상 이름"), max_length=100, blank=True)
    # The cluster the event concerns (the cluster itself, or a member VM's): its activity tab.
    cluster_id = models.BigIntegerField(_("클러스터 ID"), null=True, blank=True, db_index=True)
    outcome = models.CharField(_("결과"), max_length=10, choices=Outcome.choices)
    # What the event says: a code (an error's or a notice's) with its params, rendered in the
    # reader's language, and ``message`` for plain data (a name, "old → new").
    code = models.CharField(_("메시지 코드"), max_length=40, blank=True)
    params = models.JSONField(_("메시지 인자"), default=dict, blank=True)
    message = models.TextField(_("메시지"), blank=True)
    # Made by the server; what a client sent as X-Request-ID is kept apart, never trusted.
    request_id = models.CharField(_("요청 ID"), max_length=32, blank=True)
    client_request_id = models.CharField(_("클라이언트 요청 ID"), max_length=64, blank=True)
    at = models.DateTimeField(_("시각"), auto_now_add=True, db_index=True)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = verbose_name_plural = _("감사 이벤트")
        indexes = [models.Index(fields=["target_type", "target_id", "-at"])]

    def __str__(self):
        """In the reader's words (the admin's titles and lists): the action's label."""
        label, outcome = self.action_label, self.get_outcome_display()
        return f"{self.at:%Y-%m-%d %H:%M:%S} {label} {self.target_name} {outcome}"

    @property
    def text(self) -> str:
        """The event's message in the active language."""
        return render_message(self.code, self.params, self.message)

    @property
    def action_label(self) -> str:
        return action_label(self.action)


class ApiToken(models.Model):
    """A personal access token for the API (``vcp_…``): one user, one project.

    Only its SHA-256 is kept; the secret is shown once. It acts with the user's *current*
    role in ``project`` (read on every request), so it never does more than the user may,
    and stops the moment it is revoked, expires or the role is gone.
    """

    PREFIX = "vcp_"
    DEFAULT_DAYS = 90
    MAX_DAYS = 365
    # Active (neither revoked nor expired) tokens a user may hold: each one is a key of the
    # API's rate limiter (portal.iam.throttle), and keys nobody bounds can flush a cache.
    MAX_ACTIVE_PER_USER = 50

    user = owner_reference(models.CASCADE, "api_tokens")
    project = project_reference(models.CASCADE, "api_tokens")
    name = models.CharField(_("이름"), max_length=100)
    token_hash = models.CharField(_("토큰 해시"), max_length=64, unique=True)
    # The first characters, so a user can tell their tokens apart without the secret.
    prefix = models.CharField(_("토큰 앞부분"), max_length=12)
    created_at = models.DateTimeField(_("발급일"), auto_now_add=True)
    expires_at = models.DateTimeField(_("만료일"))
    last_used_at = models.DateTimeField(_("마지막 사용"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("폐기일"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = verbose_name_plural = _("API 토큰")

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def state(self) -> str:
        """``revoked``, ``expired`` or ``active`` (what the API 토큰 page shows)."""
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expires_at <= timezone.now() else "active"


class ThrottleWindow(models.Model):
    """One counting window of ``portal.iam.throttle`` kept in the database (login failures): no
    traffic can evict it, unlike a cache entry. ``expires_at`` is in seconds since the epoch
    by the limiter's clock; an expired row counts nothing and is replaced by the next event."""

    key = models.CharField(max_length=200, primary_key=True)
    count = models.PositiveIntegerField()
    expires_at = models.FloatField(db_index=True)

    def __str__(self):
        return f"{self.key}: {self.count}"


class SshKeyQuerySet(ProjectScopedQuerySet["SshKey"]):
    not_found = SshKeyNotFound


class SshKey(models.Model):
    """An SSH public key of a project (``portal.iam.ssh_keys`` parses and registers it): the
    VMs that choose it get it in their seed. Kept as ``type base64 [comment]``, one line, with
    the fingerprint ``ssh-keygen -l`` prints; never changed once registered."""

    class KeyType(models.TextChoices):
        ED25519 = "ssh-ed25519", "Ed25519"
        RSA = "ssh-rsa", "RSA"

    project = project_reference(models.CASCADE, "ssh_keys")
    name = models.CharField(_("이름"), max_length=63)
    public_key = models.TextField(_("공개 키"))
    key_type = models.CharField(_("키 유형"), max_length=20, choices=KeyType.choices)
    bits = models.PositiveIntegerField(_("비트"))
    fingerprint = models.CharField(_("지문"), max_length=50)
    created_by = user_reference(_("등록자"))
    created_at = models.DateTimeField(_("등록일"), auto_now_add=True)

    objects = SshKeyQuerySet.as_manager()

    class Meta:
        ordering = ["name", "id"]
        verbose_name = verbose_name_plural = _("SSH 키")
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="ssh_key_name_per_project"),
            models.UniqueConstraint(
                fields=["project", "fingerprint"], name="ssh_key_once_per_project"
            ),
        ]

    def __str__(self):
        return self.name
