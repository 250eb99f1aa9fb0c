"""A project's webhooks: its events (a cluster's status, a 검증's verdict, a 교체's start
and end) sent, signed, to the URLs it registered, retried with backoff, every attempt logged.
``events.emit`` is the one door an app sends an event through."""
