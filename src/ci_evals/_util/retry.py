"""One retry policy for every call ci-evals makes to the outside world.

LLM providers, the Letta target and judge, Letta Code and the GitHub API all retry the same way:

* :func:`retry_after` reads how long a server asked us to wait, in every form servers use:
  ``retry-after-ms`` (OpenAI), ``Retry-After`` as seconds (``"2"``, ``"1.5"``) or as an HTTP
  date, and GitHub's ``x-ratelimit-reset`` (epoch seconds) when ``x-ratelimit-remaining`` is 0.
  A negative, non-finite or unreadable value is no answer (``None``), never an exception.
* :class:`Backoff` is exponential backoff with jitter (AWS's "equal jitter": a wait drawn from
  ``[b/2, b]`` with ``b = min(cap, base * 2**n)``, so retries spread out but never come at
  once), raised to the server's ``Retry-After`` when it asked for
  longer, and never past the call's deadline. It counts the retries it granted. A server asking
  for longer than ``max_retry_after`` gets no retry, or, for a caller that promised its user a
  number of attempts (``clamp_retry_after``: the Letta target, judge and ``.af`` import), a retry
  after ``max_retry_after``.

What a caller decides itself is which failures are worth another attempt (see
:mod:`ci_evals._util.netcause` for connection failures).
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def _number(value: Any) -> float | None:
    try:
        x = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x >= 0 else None


def _get(headers: Any, name: str) -> Any:
    if headers is None:
        return None
    try:
        return headers.get(name)
    except AttributeError:
        return None


def retry_after(headers: Mapping[str, str] | Any, *, now: float | None = None) -> float | None:
    """Seconds the response asks us to wait, or None when it does not say (or says nonsense).

    ``retry-after-ms`` wins (it is the precise one), then ``Retry-After`` (seconds or an HTTP
    date), then GitHub's ``x-ratelimit-reset`` when ``x-ratelimit-remaining`` is ``0``.
    """
    now = time.time() if now is None else now
    ms = _number(_get(headers, "retry-after-ms"))
    if ms is not None:
        return ms / 1000
    value = _get(headers, "retry-after")
    if value:
        seconds = _number(value)
        if seconds is not None:
            return seconds
        try:
            when = email.utils.parsedate_to_datetime(str(value))
        except (TypeError, ValueError, IndexError):
            when = None
        if when is not None and when.tzinfo is not None:
            return max(0.0, when.timestamp() - now)
    if str(_get(headers, "x-ratelimit-remaining") or "").strip() == "0":
        reset = _number(_get(headers, "x-ratelimit-reset"))
        if reset is not None:
            return max(0.0, reset - now)
    return None


@dataclass
class Backoff:
    """Exponential backoff with equal jitter, ``Retry-After``-aware, bounded by a deadline.

    Args:
        base: the first retry waits up to this many seconds; the bound doubles each retry.
        cap: the bound never exceeds this.
        max_retries: retries after the first attempt.
        max_retry_after: a server's ``Retry-After`` is honoured up to this many seconds.
        deadline: a ``time.monotonic()`` instant no wait may pass (None: no deadline).
        clamp_retry_after: a server asking for longer than ``max_retry_after`` is waited for
            ``max_retry_after`` seconds and then retried, instead of getting no retry.
    """

    base: float = 0.5
    cap: float = 20.0
    max_retries: int = 5
    max_retry_after: float = 60.0
    deadline: float | None = None
    clamp_retry_after: bool = False
    retries: int = 0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def next_wait(self, asked: float | None = None) -> float | None:
        """The wait before the next attempt, or None when no retry is left (or no time).

        A server asking for longer than ``max_retry_after`` gets no retry: retrying earlier than
        it allowed is wasted (with ``clamp_retry_after``, the wait is ``max_retry_after``).
        Counts the retry when it grants one.
        """
        if self.retries >= self.max_retries:
            return None
        if asked is not None and asked > self.max_retry_after:
            if not self.clamp_retry_after:
                return None
            asked = self.max_retry_after
        bound = min(self.cap, self.base * 2**self.retries)
        wait = self.rng.uniform(bound / 2, bound)
        if asked is not None:
            wait = max(wait, asked)
        if self.deadline is not None and time.monotonic() + wait >= self.deadline:
            return None
        self.retries += 1
        return wait


# -- whole attempts: a sample's (Letta, Letta Code, HTTP targets) or a grade's (Letta judge) ------

MAX_RETRY_AFTER = 60.0
"""A server's ``Retry-After`` before another whole attempt is honoured up to this many seconds."""
ATTEMPT_BACKOFF_CAP = 30.0
"""No wait between two whole attempts is longer, Retry-After aside."""
RETRY_BACKOFF_HELP = (
    f"At most this many seconds (at least half of it) before the first retry; doubles each "
    f"retry, up to {ATTEMPT_BACKOFF_CAP:g} s."
)
"""The description of every ``retry_backoff`` setting (the Letta, Letta Code and HTTP targets,
the Letta judge)."""

JITTER = random.Random()
"""What whole attempts' and ``.af`` imports' waits draw their jitter from (read at each use:
tests put a recording one here)."""


def attempt_backoff(base: float, max_retries: int) -> Backoff:
    """The waits between whole attempts: ``base`` doubling up to :data:`ATTEMPT_BACKOFF_CAP`. The
    user was promised ``max_retries``, so a ``Retry-After`` past :data:`MAX_RETRY_AFTER` is waited
    for that long and the retry still made."""
    return Backoff(
        base=base,
        cap=ATTEMPT_BACKOFF_CAP,
        max_retries=max_retries,
        max_retry_after=MAX_RETRY_AFTER,
        clamp_retry_after=True,
        rng=JITTER,
    )
