"""The agent's requests to the portal: its token goes only to the configured URL.

A redirect is never followed: the answer is logged with where it pointed and stays an
``HTTPError`` (3xx) for the caller, so no answer can send the token to another host, port or
scheme. Fix ``METRICS_AGENT_URL`` instead (the ``vc`` CLI keeps its token the same way)."""

import logging
import urllib.request

log = logging.getLogger("metrics.agent")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is logged and stays an answer instead of a new request carrying the token."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        log.error(
            "%s answered %d, a redirect to %s: not followed (the token goes only to the "
            "configured portal); correct METRICS_AGENT_URL",
            req.full_url,
            code,
            newurl,
        )
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def urlopen(request, timeout):
    """``urllib.request.urlopen`` without redirects: a 3xx raises ``HTTPError``."""
    return _OPENER.open(request, timeout=timeout)
