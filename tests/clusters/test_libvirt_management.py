"""The management network's filter: a guest reaches the portal's address and port, and SSH
reaches the guest from that address (the host's side of the network) alone; the rest is
dropped."""

import xml.etree.ElementTree as ET

from portal.compute.backends.libvirt import management


def test_the_management_filter_lets_ssh_in_from_the_hosts_address_only():
    rules = ET.fromstring(management.filter_xml()).findall("rule")
    tcp = {
        direction: [
            rule
            for rule in rules
            if rule.get("direction") == direction and rule.find("tcp") is not None
        ]
        for direction in ("in", "out")
    }
    assert [(r.get("action"), r.find("tcp").attrib) for r in tcp["in"]] == [
        ("accept", {"srcipaddr": "$PORTAL_IP", "dstportstart": "22"})
    ]
    assert [r.find("tcp").attrib for r in tcp["out"]] == [
        {"dstipaddr": "$PORTAL_IP", "dstportstart": "$PORTAL_PORT"}
    ]
    last = max(rules, key=lambda rule: int(rule.get("priority")))
    assert (last.get("action"), last.find("all") is not None) == ("drop", True)
    assert int(tcp["in"][0].get("priority")) < int(last.get("priority"))
