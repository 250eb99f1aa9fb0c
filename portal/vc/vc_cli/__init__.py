"""``vc``: the Virtual Cluster portal's API from a shell (standard library only).

Configuration, first found wins: ``--url``/``--token``; ``VC_URL``/``VC_TOKEN``; the JSON
file ``VC_CONFIG`` (default ``~/.config/vc/config.json``: ``{"url": ..., "token": ...}``,
readable by its owner only: ``chmod 600``). ``VC_LANG=en`` (or ``--lang en``) asks for
English messages; Korean is the default. The options ``--url``, ``--token``, ``-o``/``--output``
and ``--lang`` go before or after the subcommand.

Exit codes:
  0  done
  1  refused by a rule or invalid input (the message is the rule's), or --wait saw the
     operation fail
  2  usage error (bad arguments, no URL or token configured, a config file that is not
     a JSON object of strings)
  3  not authenticated (401: missing, bad, expired or revoked token) or permission missing (403)
  4  not found (404: outside the token's project, or no such id or name)
  5  the portal or the network failed (5xx, connection refused, a redirect, an answer
     that is not the portal's JSON)
  6  --wait gave up after --timeout seconds (the operation goes on)

``vc cluster validate --wait`` prints each member's verdict; it exits 1 when a member is
judged 불량 (bad) or 응답 없음 (no answer), 0 when all are 정상 or 점검 필요.
"""

__version__ = "0.1.0"
