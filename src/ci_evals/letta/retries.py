"""Which failures of a Letta server are worth another try, and how long to wait before it.

Three loops retry Letta calls: a whole attempt of the Letta target (and of ``letta_code``), a
whole attempt of the agent judge (a fresh judge each time), and the ``.af`` import inside either.
All three wait as :class:`ci_evals._util.retry.Backoff` says: exponential backoff with equal
jitter, capped, raised to the server's ``Retry-After`` (honoured up to :data:`MAX_RETRY_AFTER`),
for a bounded number of retries. A whole attempt waits as
:func:`ci_evals._util.retry.attempt_backoff` says (from the spec's ``retry_backoff``, for its
``max_retries``; the HTTP target's attempts too); an import starts at :data:`IMPORT_BACKOFF`,
is capped at :data:`IMPORT_BACKOFF_CAP` and is tried :data:`IMPORT_TRIES` times. Those counts are promised to
the user, so a ``Retry-After`` longer than :data:`MAX_RETRY_AFTER` is waited for that long and the
retry still made (``clamp_retry_after``). ``letta_client`` is imported only inside functions.
"""

from __future__ import annotations

from ci_evals._util import retry
from ci_evals._util.retry import MAX_RETRY_AFTER, Backoff, retry_after

IMPORT_TRIES = 6
"""Tries of one ``.af`` import: the first and five retries."""
IMPORT_BACKOFF = 0.25
"""Seconds the first retry of an import waits at most; the bound doubles each retry."""
IMPORT_BACKOFF_CAP = 4.0
"""No retry of an import waits longer, Retry-After aside."""


def import_backoff() -> Backoff:
    """The waits between the tries of one ``.af`` import."""
    return Backoff(
        base=IMPORT_BACKOFF,
        cap=IMPORT_BACKOFF_CAP,
        max_retries=IMPORT_TRIES - 1,
        max_retry_after=MAX_RETRY_AFTER,
        clamp_retry_after=True,
        rng=retry.JITTER,
    )


def transient(exc: BaseException) -> bool:
    """A failure the server recovers from by itself: a deadlocked import (HTTP 400 'Import failed'),
    408, 409, 429, 5xx, a dropped connection or a timeout."""
    import letta_client

    if isinstance(exc, letta_client.APIStatusError):
        if exc.status_code >= 500 or exc.status_code in (408, 409, 429):
            return True
        text = str(exc.body if exc.body is not None else exc)
        return exc.status_code == 400 and ("Import failed" in text or "deadlock" in text)
    return isinstance(exc, letta_client.APIConnectionError)  # includes APITimeoutError


def retryable(exc: BaseException) -> bool:
    """Worth another attempt: anything but a client error (4xx other than 408, 409, 429 and a
    deadlocked import)."""
    import letta_client

    if isinstance(exc, letta_client.APIStatusError):
        return transient(exc)
    return True


def server_asked(exc: BaseException | None) -> float | None:
    """The seconds the server's answer asked us to wait (its ``Retry-After``), or None."""
    import letta_client

    if isinstance(exc, letta_client.APIStatusError):
        return retry_after(exc.response.headers)
    return None


def attempt_wait(policy: Backoff, exc: BaseException, *, give_up: bool = False) -> float | None:
    """The wait before another whole attempt after ``exc``, or None for none: the caller gives up
    (``give_up``), the failure is not :func:`retryable`, the import inside the attempt already
    retried it enough (``exhausted``), or ``policy`` has no retry left."""
    if give_up or not retryable(exc) or getattr(exc, "exhausted", False):
        return None
    return policy.next_wait(server_asked(exc))
