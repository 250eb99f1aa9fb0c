from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ClustersConfig(AppConfig):
    name = "clusters"
    verbose_name = _("가상 클러스터")

    def ready(self):
        # A member's health moving to 의심 or 불량 is acted on under its cluster's 교체 정책:
        # the module registers its listener with ``vms.health`` as it loads.
        from clusters.operations import heal  # noqa: F401
