from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class VmsConfig(AppConfig):
    name = "vms"
    verbose_name = _("가상머신")
