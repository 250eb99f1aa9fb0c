from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ClustersConfig(AppConfig):
    name = "clusters"
    verbose_name = _("가상 클러스터")
