"""The public REST API (``/api/v1/``) and its personal access tokens.

Every resource calls the same service functions the console calls (``clusters.services``,
``vms.services``, ``clusters.operations``) through the same ``restrict()`` gates, so no rule,
permission or message is written twice; this package only translates HTTP to those calls
and their typed errors to RFC 9457 problem documents.
"""
