from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CatalogConfig(AppConfig):
    name = "portal.catalog"
    label = "catalog"
    verbose_name = _("카탈로그")

    def ready(self):
        from portal.catalog import version  # models are ready only now
        from portal.iam.auth import read_with_user

        read_with_user(version.READ_AS, version.VERSION_SQL)
