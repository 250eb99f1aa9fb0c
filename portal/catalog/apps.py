from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CatalogConfig(AppConfig):
    name = "portal.catalog"
    label = "catalog"
    verbose_name = _("카탈로그")
