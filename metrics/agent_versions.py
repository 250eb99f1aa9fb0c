"""Which version of the agent each VM runs, as the agent says in its ``User-Agent``
(``vc-metrics-agent/<version>``, ``metrics.vm_agent.main.USER_AGENT``), kept on the VM's
``MetricsToken`` and shown on the VM's page and in the API's VM detail.

A header rather than a field of the batch: a portal refuses a batch with a key it does not
know, so a new agent posting to an older portal would be refused whole. The ingest is the
hot path (``bench_metrics``): each process remembers the version it last stored per token,
so an agent whose version stays the same costs no query after its first request, and one
that changed costs one UPDATE that writes nothing if another process wrote it already. A
request without the agent's User-Agent (a script posting samples) changes nothing.
"""

import re

from metrics.models import MetricsToken

# What the agent sends: its version, then possibly a word (``jobs``). Anything else (another
# client, a version too long for the column) is not an agent's version.
_AGENT = re.compile(r"vc-metrics-agent/([0-9A-Za-z][0-9A-Za-z.+!_-]{0,31})(?:\s|$)")
_stored: dict[str, str] = {}  # token hash -> the version this process last wrote
REMEMBERED = 10_000  # tokens: a few MB at most, then forgotten (one UPDATE each again)


def reported(request) -> str | None:
    """The version in the request's User-Agent, if an agent sent it."""
    found = _AGENT.match(request.headers.get("User-Agent", ""))
    return found.group(1) if found else None


def note(token_hash: str, request) -> None:
    """Keep the version the request reports for the token's VM. Call it once the token has
    been verified: a made-up token must not take an entry."""
    version = reported(request)
    if version is None or _stored.get(token_hash) == version:
        return
    tokens = MetricsToken.objects.filter(token_hash=token_hash)
    tokens.exclude(agent_version=version).update(agent_version=version)
    if len(_stored) >= REMEMBERED:
        _stored.clear()
    _stored[token_hash] = version
