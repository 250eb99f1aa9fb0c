"""What the compute layer calls in an app above it, registered by that app as it loads: the
compute layer imports nothing of the apps (the layer test holds it).

- The guest agent's metrics tokens, registered by the metrics app (``metrics/apps.py``):
  ``issue(vm_id, *, actor)`` returns ``(vm, token)`` for the seed of a starting VM;
  ``revoke(vm_id, *, actor)`` makes the token of a stopped VM write nothing more.

A hook asked for before any app registered it is the backend's error (the VM's start fails
and says so, nothing is defined), with the missing hook named in the log.
"""

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

from portal.foundation.errors import BackendError

log = logging.getLogger(__name__)


class AgentTokens(NamedTuple):
    issue: Callable[..., tuple[Any, str]]
    revoke: Callable[..., Any]


_agent_tokens: AgentTokens | None = None


def register_agent_tokens(
    issue: Callable[..., tuple[Any, str]], revoke: Callable[..., Any]
) -> None:
    """Called by the metrics app's ``ready()``; called again, it replaces the pair."""
    global _agent_tokens
    _agent_tokens = AgentTokens(issue, revoke)


def has_agent_tokens() -> bool:
    return _agent_tokens is not None


def agent_tokens() -> AgentTokens:
    if _agent_tokens is None:
        log.error(
            "no app registered the guest agent's tokens (portal.compute.hooks."
            "register_agent_tokens, from metrics' ready()): a guest cannot be given one"
        )
        raise BackendError()
    return _agent_tokens
