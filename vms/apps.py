from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class VmsConfig(AppConfig):
    name = "vms"
    verbose_name = _("가상머신")

    def ready(self):
        # The words of its evidence that event texts read (``event_text.DETAILS``).
        from vms import health  # noqa: F401
