from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ComputeConfig(AppConfig):
    name = "portal.compute"
    label = "compute"
    verbose_name = _("컴퓨트")
