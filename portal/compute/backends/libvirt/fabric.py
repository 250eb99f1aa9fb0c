"""A cluster's fabric partition, programmed where it lives.

- On a host with emulated slots (no ConnectX), the fabric *is* an isolated libvirt network
  per cluster, ``vc-fab-<cluster id>`` (see ``names``; no ``<forward>``): its members reach
  each other on it and nothing else does (libvirt does not route between isolated networks).
- InfiniBand: the partition key (PKey) is the tenant boundary, held by the subnet manager;
  ``UfmClient`` creates it and adds the members' port GUIDs through UFM's REST API.
- RoCEv2: the VLAN is set on each member's VF (``<interface type='hostdev'>`` with
  ``<vlan>``, see ``domain``); the switch ports carry the VLAN as configured by the network
  team, so nothing is programmed here.

Only networks of ours (``names.owned_network``: our name and our UUID) are ever touched.
"""

import ipaddress
import json
import logging
import urllib.error
import urllib.request

from django.conf import settings

from portal.compute.backends import simulator
from portal.compute.backends.libvirt.names import (
    cluster_id_of,
    network_name,
    network_uuid,
    owned_network,
)
from portal.foundation.errors import BackendError

log = logging.getLogger(__name__)

# A cluster's address block: one /21 of 172.16.0.0/12, the simulator's RoCE blocks; member
# ``i`` is host ``10 + i``.
NETWORK = simulator.ROCE_NETWORK
BLOCK_PREFIX = simulator.ROCE_BLOCK_PREFIX
BLOCK_SIZE = simulator.ROCE_BLOCK_SIZE
BLOCKS = simulator.ROCE_BLOCKS
FIRST_HOST = simulator.ROCE_FIRST_HOST
MAX_MEMBERS = simulator.ROCE_MAX_MEMBERS
PKEY_BASE = 0x0100  # PKeys 0x0100 + block (0x7fff is the default partition: never used)
VLAN_BASE = 100  # VLANs 100 + block (< 4095)


def block_network(block) -> ipaddress.IPv4Network:
    base = NETWORK.network_address + block * BLOCK_SIZE
    return ipaddress.IPv4Network(f"{base}/{BLOCK_PREFIX}")


def member_ip(block, index) -> str:
    return str(block_network(block).network_address + FIRST_HOST + index)


def network_xml(cluster_id) -> str:
    """A bridge with no address of the host's: the members reach each other on it, and the
    host (its services) is not on the fabric at all."""
    return (
        f"<network><name>{network_name(cluster_id)}</name><uuid>{network_uuid(cluster_id)}</uuid>"
        "</network>"
    )


class FabricManager:
    """Programs and removes a cluster's partition on the hosts its members use."""

    def __init__(self, connect):
        self.connect = connect  # host -> libvirt connection

    def ensure(self, partition, hosts) -> None:
        for host in hosts:
            if host.emulated:
                self.ensure_network(host, partition.cluster_id)
        if partition.pkey is not None and any(not h.emulated for h in hosts):
            ufm = UfmClient.from_settings()
            if ufm is not None:
                ufm.add_pkey(partition.pkey_hex)

    def join_guids(self, partition, guids) -> None:
        ufm = UfmClient.from_settings()
        if ufm is not None and partition.pkey is not None and guids:
            ufm.add_guids(partition.pkey_hex, guids)

    def ensure_network(self, host, cluster_id) -> None:
        import libvirt

        conn = self.connect(host)
        name = network_name(cluster_id)
        try:
            net = conn.networkLookupByName(name)
        except libvirt.libvirtError:
            net = conn.networkDefineXML(network_xml(cluster_id))
        if owned_network(net) != cluster_id:  # another portal's: never join our members to it
            log.error("network %s on host %s is not this portal's", name, host)
            raise BackendError()
        if not net.isActive():
            net.create()

    def remove(self, cluster_id, hosts, pkey_hex="") -> None:
        """Remove the cluster's network from every host, and its PKey from UFM. A host that
        cannot be reached now keeps its copy: the reconciler finds it later as leaked."""
        import libvirt

        for host in hosts:
            try:
                self.remove_network(host, network_name(cluster_id))
            except (BackendError, libvirt.libvirtError):
                log.warning("fabric network of cluster %s left on host %s", cluster_id, host)
        ufm = UfmClient.from_settings()
        if ufm is not None and pkey_hex:
            ufm.delete_pkey(pkey_hex)

    def remove_network(self, host, name) -> None:
        import libvirt

        if cluster_id_of(name) is None:  # never anything but our own
            raise ValueError(name)
        try:
            net = self.connect(host).networkLookupByName(name)
        except libvirt.libvirtError:
            return
        if owned_network(net) is None:
            log.warning("network %s on host %s is not this portal's: left alone", name, host)
            return
        if net.isActive():
            net.destroy()
        if net.isPersistent():
            net.undefine()

    def networks(self, host) -> list[str]:
        """Names of the fabric networks on ``host`` (ours only)."""
        nets = self.connect(host).listAllNetworks()
        return [n.name() for n in nets if owned_network(n) is not None]


class UfmClient:
    """NVIDIA UFM's REST API for partition keys (UFM Enterprise REST API guide, "PKeys"):

    - ``POST /ufmRest/resources/pkeys/add`` ``{"pkey", "index0", "ip_over_ib"}`` creates one;
    - ``POST /ufmRest/resources/pkeys/`` ``{"guids", "pkey", "membership"}`` adds ports;
    - ``DELETE /ufmRest/resources/pkeys/<pkey>`` removes it.

    Basic authentication. Set ``UFM_URL`` (and ``UFM_USER``/``UFM_PASSWORD``) to enable it.
    """

    def __init__(self, base_url, user="", password="", timeout=10.0):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json"}
        if user:
            import base64

            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"

    @classmethod
    def from_settings(cls):
        url = getattr(settings, "UFM_URL", "")
        if not url:
            return None
        return cls(url, settings.UFM_USER, settings.UFM_PASSWORD)

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - the operator's UFM_URL
            self.base_url + path, data=data, method=method, headers=self.headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - the operator's UFM_URL
                return response.status
        except urllib.error.HTTPError as exc:
            if method == "DELETE" and exc.code == 404:
                return exc.code  # already gone: a retried release
            log.warning("UFM %s %s: HTTP %s", method, path, exc.code)
            raise BackendError() from exc
        except OSError as exc:
            log.warning("UFM %s %s: %s", method, path, exc)
            raise BackendError() from exc

    def add_pkey(self, pkey):
        """Idempotent in UFM: adding an existing PKey succeeds."""
        return self._call(
            "POST",
            "/ufmRest/resources/pkeys/add",
            {"pkey": pkey, "index0": False, "ip_over_ib": True},
        )

    def add_guids(self, pkey, guids, membership="full"):
        return self._call(
            "POST",
            "/ufmRest/resources/pkeys/",
            {
                "guids": [g.removeprefix("0x") for g in guids],
                "pkey": pkey,
                "membership": membership,
            },
        )

    def delete_pkey(self, pkey):
        return self._call("DELETE", f"/ufmRest/resources/pkeys/{pkey}")
