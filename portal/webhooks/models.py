"""A project's webhooks, the deliveries of its events (an outbox: a row per event and
webhook, written in the transaction of the change it tells of) and each delivery's attempts."""

import uuid

from django.db import models
from django.utils.translation import gettext_lazy as _

from portal.foundation.errors.webhooks import WebhookNotFound
from portal.models import ProjectScopedQuerySet, project_reference, user_reference


class EventType(models.TextChoices):
    """What a webhook may subscribe to (each sent from ``clusters.events``)."""

    MEMBER_HEALTH_CHANGED = "member.health_changed", _("멤버 상태 변경")
    VALIDATION_FINISHED = "validation.finished", _("검증 결과")
    REPLACEMENT_STARTED = "replacement.started", _("교체 시작")
    REPLACEMENT_SUCCEEDED = "replacement.succeeded", _("교체 성공")
    REPLACEMENT_FAILED = "replacement.failed", _("교체 실패")
    CLUSTER_STATUS_CHANGED = "cluster.status_changed", _("클러스터 상태 변경")


# What the 테스트 전송 button sends: to the one webhook asked, whatever it subscribes to.
TEST_EVENT = "webhook.test"


class WebhookQuerySet(ProjectScopedQuerySet["Webhook"]):
    not_found = WebhookNotFound


class Webhook(models.Model):
    """A URL of a project that its events are POSTed to, signed with ``secret``.

    The secret must sign every delivery, so it is kept as it is (a hash could not sign):
    shown once when made, never again on a page, in the API, the admin or a log line."""

    SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret

    project = project_reference(models.CASCADE, "webhooks")
    name = models.CharField(_("이름"), max_length=63)
    url = models.CharField(_("URL"), max_length=2000)
    events = models.JSONField(_("이벤트"), default=list)
    secret = models.CharField(_("서명 비밀"), max_length=80)
    created_by = user_reference(_("등록자"))
    created_at = models.DateTimeField(_("등록일"), auto_now_add=True)

    objects = WebhookQuerySet.as_manager()

    class Meta:
        ordering = ["name", "id"]
        verbose_name = verbose_name_plural = _("웹훅")
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="webhook_name_per_project")
        ]

    def __str__(self):
        return self.name

    @property
    def event_labels(self) -> list[str]:
        labels = dict(EventType.choices)
        return [str(labels.get(event, event)) for event in self.events]


class WebhookDelivery(models.Model):
    """One event for one webhook: the body exactly as it is signed and sent (every attempt
    sends the same bytes), where it stands, and when it is tried next."""

    class Status(models.TextChoices):
        PENDING = "PENDING", _("전송 대기")
        SUCCEEDED = "SUCCEEDED", _("성공")
        FAILED = "FAILED", _("실패")

    project = project_reference(models.CASCADE, "webhook_deliveries")
    webhook = models.ForeignKey(
        Webhook, on_delete=models.CASCADE, related_name="deliveries", verbose_name=_("웹훅")
    )
    # The event's id: the same for every webhook it goes to and every attempt, so a receiver
    # can drop one it already took.
    event_id = models.UUIDField(_("이벤트 ID"), default=uuid.uuid4)
    event_type = models.CharField(_("이벤트 유형"), max_length=40)
    body = models.TextField(_("본문"))
    status = models.CharField(
        _("상태"), max_length=10, choices=Status.choices, default=Status.PENDING
    )
    attempts = models.PositiveSmallIntegerField(_("시도 횟수"), default=0)
    # When a worker may try it (again); null once it is settled.
    next_attempt_at = models.DateTimeField(_("다음 시도"), null=True, blank=True)
    created_at = models.DateTimeField(_("생성일"), auto_now_add=True)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = verbose_name_plural = _("웹훅 전송")
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(status="PENDING"),
                name="webhook_delivery_due",
            )
        ]

    def __str__(self):
        return f"{self.event_type} → {self.webhook_id}"


class WebhookAttempt(models.Model):
    """One POST of a delivery: the receiver's status code, or why there was none."""

    delivery = models.ForeignKey(
        WebhookDelivery,
        on_delete=models.CASCADE,
        related_name="attempt_log",
        verbose_name=_("웹훅 전송"),
    )
    number = models.PositiveSmallIntegerField(_("회차"))
    at = models.DateTimeField(_("시각"))
    status_code = models.PositiveSmallIntegerField(_("응답 코드"), null=True, blank=True)
    # Why no answer came (``timeout``, ``connection``, ``address``, ``tls``); blank with a code.
    error = models.CharField(_("오류"), max_length=20, blank=True)
    duration_ms = models.PositiveIntegerField(_("소요 시간(ms)"))

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = verbose_name_plural = _("웹훅 전송 시도")

    def __str__(self):
        return f"#{self.number} {self.status_code or self.error}"

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300
