"""Rate limits an endpoint is paced by: what the user set, what the server's headers announce.

* :class:`Limits`: what the run was told (``--max-concurrent``, ``rpm``/``tpm`` from the suite
  or the CLI, the ``max_wait`` throttling budget).
* :class:`Bucket`: a token bucket that lets calls run into debt, so :meth:`Bucket.reserve` says
  how long a call must wait before it may start; calls are paced at ``HEADROOM`` (:mod:`ci_evals.config.rates`) of the limit
  with ``BURST_SECONDS`` of burst.
* :func:`announced`: OpenAI's ``x-ratelimit-limit/remaining/reset-*`` and Anthropic's
  ``anthropic-ratelimit-*`` headers, read into one :class:`Announced` (bad values are ignored:
  headers come from outside).

The scheduler (:mod:`ci_evals.llm.scheduler`) decides what to do with them.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ci_evals.config.rates import DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_WAIT, seconds_per_request

BURST_SECONDS = 0.5
"""Our bucket holds half a second of calls: half of what OpenAI's short windows allow, so the
server's bucket keeps slack for calls that the network delivers closer together than we sent them."""


@dataclass
class Limits:
    """What the run was told about an endpoint: requests and tokens per minute, throttling budget."""

    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    rpm: float | None = None
    tpm: float | None = None
    max_wait: float = DEFAULT_MAX_WAIT


class Bucket:
    """A token bucket that lets calls run into debt: :meth:`reserve` says when a call may start.

    Reservations are served in call order; a call costing more than the bucket holds waits for
    the debt to be repaid rather than never running.
    """

    def __init__(
        self,
        per_minute: float,
        burst_s: float = BURST_SECONDS,
        max_debt_s: float = DEFAULT_MAX_WAIT,
    ) -> None:
        self.per_minute = per_minute
        self.max_debt_s = max_debt_s
        self.rate = 1.0 / seconds_per_request(per_minute)
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self.at = time.monotonic()

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now

    def reserve(self, cost: float, now: float) -> float:
        """Take ``cost`` now; the seconds to wait before the call may start."""
        self._refill(now)
        self.level -= cost
        return 0.0 if self.level >= 0 else -self.level / self.rate

    def adjust(self, delta: float) -> None:
        """Charge (or refund) ``delta`` after the fact (the real token count is known late). A charge
        takes the bucket at most ``max_debt_s`` of refill into debt (or no deeper than it was): a
        count a server reports cannot hold the next call longer than ``max_wait``."""
        self._refill(time.monotonic())
        floor = min(self.level, -self.rate * self.max_debt_s)
        self.level = max(self.level - delta, floor)


def _num(headers: Any, name: str) -> float | None:
    try:
        value = headers.get(name) if headers is not None else None
        x = float(value) if value not in (None, "") else None
    except (TypeError, ValueError, AttributeError):
        return None
    return x if x is not None and math.isfinite(x) and x >= 0 else None


def _duration(text: Any) -> float | None:
    """OpenAI's reset durations (``"120ms"``, ``"1s"``, ``"6m0s"``, ``"1h2m3.5s"``) in seconds."""
    if not text:
        return None
    s, total, num = str(text).strip(), 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    i = 0
    while i < len(s):
        c = s[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        unit = "ms" if s.startswith("ms", i) else c
        if unit not in units or not num:
            return None
        try:
            total += float(num) * units[unit]
        except ValueError:
            return None
        num, i = "", i + len(unit)
    return None if num else total


def _rfc3339_in(text: Any) -> float | None:
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time()) if when.tzinfo else None


@dataclass
class Announced:
    """The rate-limit state a response's headers announced (any provider)."""

    rpm: float | None = None
    tpm: float | None = None
    remaining_requests: float | None = None
    reset_requests: float | None = None


def announced(headers: Any) -> Announced | None:
    """Read OpenAI's ``x-ratelimit-*`` or Anthropic's ``anthropic-ratelimit-*`` headers."""
    if headers is None:
        return None
    rpm = _num(headers, "x-ratelimit-limit-requests")
    if rpm is not None or _num(headers, "x-ratelimit-limit-tokens") is not None:
        return Announced(
            rpm=rpm,
            tpm=_num(headers, "x-ratelimit-limit-tokens"),
            remaining_requests=_num(headers, "x-ratelimit-remaining-requests"),
            reset_requests=_duration(_get(headers, "x-ratelimit-reset-requests")),
        )
    rpm = _num(headers, "anthropic-ratelimit-requests-limit")
    tpm = _num(headers, "anthropic-ratelimit-tokens-limit") or _num(
        headers, "anthropic-ratelimit-input-tokens-limit"
    )
    if rpm is not None or tpm is not None:
        return Announced(
            rpm=rpm,
            tpm=tpm,
            remaining_requests=_num(headers, "anthropic-ratelimit-requests-remaining"),
            reset_requests=_rfc3339_in(_get(headers, "anthropic-ratelimit-requests-reset")),
        )
    return None


def _get(headers: Any, name: str) -> Any:
    try:
        return headers.get(name)
    except AttributeError:
        return None


def estimate_tokens(body: dict[str, Any]) -> float:
    """Tokens a request may cost against a token limit: ~4 characters a token, plus max_tokens."""
    text = json.dumps(
        body.get("messages") or body.get("input") or body.get("contents") or "", ensure_ascii=False
    )
    out = body.get("max_tokens") or body.get("max_completion_tokens") or 0
    return len(text) / 4 + (out if isinstance(out, int | float) else 0)
