from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = _("포털 IAM")

    def ready(self):
        from portal.speed import pgtime  # noqa: F401 - connects the timestamptz loader
