"""A server's own words in a failure line: its message, scrubbed then cut, and its request id.

The id (``x-request-id``: OpenAI and most compatible servers; ``request-id``: Anthropic) is what a
provider's support asks for, so it goes at the end of the message, e.g. ``HTTP 500: the server had
an error (request req_abc123)``. The message is scrubbed of secrets before it is cut (a cut key
would no longer be recognised), and cut to :data:`SERVER_TEXT` so that the id survives the
line's own cut at :data:`ci_evals._util.redact.MESSAGE_LIMIT`. A leaf: the vendor layer
(:mod:`ci_evals.llm.providers`) and the direct path (:mod:`ci_evals.llm.answers`) both use it.
"""

from __future__ import annotations

from typing import Any

from ci_evals._util.redact import scrub
from ci_evals._util.text import fit, one_line

REQUEST_ID_HEADERS = ("x-request-id", "request-id")
SERVER_TEXT = 400
"""Characters of a server's message kept in a failure line."""
_ID_CHARS = 120


def request_id(headers: Any) -> str | None:
    """The server's id of this request (one line, bounded), or None."""
    if headers is None:
        return None
    for name in REQUEST_ID_HEADERS:
        try:
            value = headers.get(name)
        except (AttributeError, TypeError):
            return None
        if value:
            return scrub(one_line(value, _ID_CHARS))
    return None


def server_says(text: Any, headers: Any) -> str:
    """The server's message, scrubbed then cut, with `` (request <id>)`` when the server named it."""
    said = fit(scrub(one_line(text or "no details", 10 * SERVER_TEXT)), SERVER_TEXT) or "no details"
    rid = request_id(headers)
    return f"{said} (request {rid})" if rid else said
