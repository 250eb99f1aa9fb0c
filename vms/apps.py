from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class VmsConfig(AppConfig):
    name = "vms"
    verbose_name = _("가상머신과 카탈로그")

    def ready(self):
        from portal.auth import read_with_user
        from vms import catalog_version  # models are ready only now

        read_with_user(catalog_version.READ_AS, catalog_version.VERSION_SQL)
