from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _


class ClustersConfig(AppConfig):
    name = "clusters"
    verbose_name = _("가상 클러스터")

    def ready(self):
        from clusters import tally  # models are ready only now

        post_migrate.connect(tally.on_migrate, sender=self, dispatch_uid="clusters.tally")
