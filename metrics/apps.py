from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MetricsConfig(AppConfig):
    name = "metrics"
    verbose_name = _("메트릭")

    def ready(self):
        from metrics import services
        from portal.compute import hooks

        # The libvirt backend gives each guest a token for its agent, and revokes it at the
        # stop, through these (the compute layer imports nothing of metrics).
        hooks.register_agent_tokens(issue=services.rotate_token, revoke=services.revoke_token)
