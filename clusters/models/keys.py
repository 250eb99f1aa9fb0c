"""A cluster's own SSH key pair: what lets its members reach each other without a password
(``mpirun``, ``ssh`` between members).

The portal makes a new ed25519 pair at every start (``clusters.cluster_key``) and hands it
only to the agents of the cluster's members (``clusters.peers``). The private key is kept
sealed (``clusters.cluster_key.seal``: Fernet under a key derived from ``SECRET_KEY``), in a
row of its own: no page, serializer, admin or API reads this model, and a cluster's queries
never load it.
"""

from django.db import models
from django.utils.translation import gettext_lazy as _

from vms.models import cluster_reference


class ClusterKey(models.Model):
    cluster = cluster_reference(models.CASCADE, "ssh_key", one_to_one=True, primary_key=True)
    # ``ssh-ed25519 <base64> vc-cluster-<id>``: what the members' authorized_keys carry.
    public_key = models.TextField(_("공개 키"))
    # The OpenSSH private key, sealed (never shown, never logged).
    sealed_private_key = models.TextField(_("개인 키(암호화)"))
    # The cluster's start that made it (``VirtualCluster.generation``).
    generation = models.PositiveIntegerField(_("세대"))
    created_at = models.DateTimeField(_("생성일"), auto_now=True)

    class Meta:
        verbose_name = verbose_name_plural = _("클러스터 SSH 키")

    def __str__(self) -> str:
        return f"{self.cluster_id}: {self.generation}"
