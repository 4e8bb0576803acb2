"""How one LLM call's attempt fails: :class:`Failure`, and the rules every path maps to it.

Every way a call goes out (the direct path and the SDK's own in :mod:`ci_evals.llm.transport`, the
vendors' SDKs in :mod:`ci_evals.llm.providers`) ends an attempt that did not give a usable answer
the same way: a :class:`Failure` that says whether another attempt is worth it, how long the server
asked to wait, and the cause the endpoint's breaker counts. :func:`status_failure` classifies an
HTTP error answer (throttling, systematic, or transient), :func:`transport_failure` a call that got
no answer at all. No call follows a redirect (:data:`NO_REDIRECTS`).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from ci_evals._util.netcause import cause_of
from ci_evals._util.text import one_line

NO_REDIRECTS = {"allow_redirects": False, "follow_redirects": False}
"""What every LLM call's HTTP client is told (aiohttp's name, httpx's name): follow no redirect. A
3xx is a failure naming where it points: the key, the prompt and the body never go to another
host, nor from https to http (google-genai sent ``x-goog-api-key`` on to any origin)."""


@dataclass
class Failure(Exception):
    """One attempt failed. ``retry``: worth another attempt; ``wait``: seconds the server asked for;
    ``headers``: the response headers (``Retry-After`` is read from them by the caller);
    ``kind``: a cause the breaker counts (:mod:`ci_evals._util.netcause` kinds, ``http_401``...)."""

    problem: str
    status: int | None = None
    retry: bool = True
    wait: float | None = None
    headers: Any = None
    kind: str | None = None


def status_failure(
    status: int, text: str, headers: Any, code: str | None = None, *, label: str | None = None
) -> Failure:
    """The Failure for an HTTP error answer (any provider): throttling, systematic, or transient.
    A redirect (3xx) is never followed (see :data:`NO_REDIRECTS`): systematic, not retried.
    ``label`` replaces ``HTTP <status>`` at the line's start (an error code inside an HTTP 200)."""
    shown = label or f"HTTP {status}"
    if 300 <= status < 400:
        return Failure(
            f"HTTP {status}: the server redirects{_redirect_target(headers)}; LLM calls follow no "
            "redirect (the key goes to base_url's host alone): set base_url to the address it names",
            status,
            retry=False,
            headers=headers,
            kind=f"http_{status}",
        )
    if status == 429 and code == "insufficient_quota":
        return Failure(f"{shown}: {text}", status, retry=False, headers=headers, kind="quota")
    if status in (400, 401, 403, 404):
        return Failure(
            f"{shown}: {text}", status, retry=False, headers=headers, kind=f"http_{status}"
        )
    return Failure(f"{shown}: {text}", status, retryable_status(status), headers=headers)


def _redirect_target(headers: Any) -> str:
    """`` to <where the Location header points>`` (no user:password, query or fragment), or ''."""
    try:
        parts = urllib.parse.urlsplit(str(headers.get("location") or "").strip())
    except (AttributeError, ValueError):
        return ""
    host = parts.netloc.rsplit("@", 1)[-1]
    where = one_line(f"{parts.scheme}://{host}{parts.path}" if host else parts.path)[:200]
    return f" to {where}" if where else ""


def transport_failure(exc: BaseException, url: Any, timeout: float) -> Failure:
    """A call that got no HTTP answer, named by its real cause (:func:`ci_evals._util.netcause.cause_of`)."""
    cause = cause_of(exc, str(url) if url else None, timeout)
    return Failure(cause.message, retry=cause.retry, kind=cause.kind)


def retryable_status(status: int) -> bool:
    """429, 408, 409 and every 5xx (Anthropic's 529 ``overloaded`` included)."""
    return status in (408, 409, 429) or status >= 500
