"""How a failed LLM call is told: :class:`LLMError`, and its one line, which never holds the key.

A call that failed for good (not retryable, out of retries, throttled past ``max_wait``, or not
sent because its endpoint stopped) raises :class:`LLMError` with :func:`call_error`'s line: the
endpoint as :func:`shown_url` shows it (no user:password), the path, the problem and the retries
taken, scrubbed of the key (a server may echo it) and cut to ``MESSAGE_LIMIT``. The breaker's own
line, when an endpoint stops, is :func:`ci_evals.llm.hints.stop_line`.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from ci_evals._util.errors import CiEvalsError
from ci_evals._util.redact import MESSAGE_LIMIT, scrub_and_shorten


class LLMError(CiEvalsError):
    """An LLM call failed for good (non-retryable, or out of retries), or was not sent because
    the run's ``max_cost_usd`` is spent (``category`` ``budget``). Never contains the key.

    ``category`` is what a sample or grade this error stops is counted as: ``None`` for a failed
    call (the caller's own category: ``target``, ``grading``), ``budget`` for the run's budget.
    ``waited_s``: the seconds the call waited in ci-evals' queue and rate-limit pauses.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retries: int = 0,
        throttled: int = 0,
        category: str | None = None,
        waited_s: float = 0.0,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retries = retries
        self.throttled = throttled
        self.category = category
        self.waited_s = waited_s


def shown_url(url: str) -> str:
    """The URL without any user:password part, for messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def call_error(
    base_url: str,
    key: str | None,
    path: str,
    problem: str,
    status: int | None,
    retries: int,
    throttled: int = 0,
) -> LLMError:
    """The error of a call to ``base_url`` + ``path`` that failed for good, scrubbed of ``key``."""
    tail = f" (after {retries} retries)" if retries else ""
    msg = f"{shown_url(base_url)}{path}: {problem}{tail}"
    return LLMError(
        scrub_and_shorten(msg, MESSAGE_LIMIT, [key]),
        status=status,
        retries=retries,
        throttled=throttled,
    )
