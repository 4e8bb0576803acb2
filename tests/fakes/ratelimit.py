"""Rate limits for the fake LLM servers: token buckets with the vendors' documented 429s and headers.

Why: a gate runs against providers that limit requests and tokens per minute. The fakes enforce a
limit the way the vendors document it, so a client's pacing, backoff and breaker are tested (and
benchmarked) over real HTTP against the same answers a real endpoint gives.

The model (``server.rate_limit(rpm, tpm, burst_s)``):

* A request bucket of capacity ``max(1, rpm * burst_s / 60)``, refilled continuously at
  ``rpm / 60`` per second. OpenAI enforces its per-minute limits over short windows (a burst of
  the whole minute's requests is rejected); ``burst_s`` is that window, ``burst_s=60`` gives a
  bucket that holds the whole minute. A token bucket likewise for ``tpm``.
* Every API request is charged 1 request and its estimated tokens on arrival: the prompt's
  whitespace words plus ``max_tokens`` (OpenAI: ``max_completion_tokens`` or ``max_tokens``;
  Anthropic: ``max_tokens``; Gemini: ``generationConfig.maxOutputTokens``). An OpenAI request
  without a cap is charged its prompt on arrival and the reply's completion words when the reply
  is made (the bucket may then go below zero: the next request waits for it, as OpenAI's
  after-the-fact accounting does). Embeddings are charged their input words.
* A request that would overdraw either bucket is rejected at once (no injected latency), not
  queued, and charges nothing. A request needing more tokens than the token bucket holds can never
  fit: OpenAI's "Request too large" 429, without a retry time.
* ``remaining`` in the headers is what fits now (the bucket's level, whole units); ``limit`` is
  the per-minute figure, as the vendors report it; ``reset`` is the time until the bucket is full.

Headers and bodies (OpenAI https://platform.openai.com/docs/guides/rate-limits, Anthropic
https://docs.anthropic.com/en/api/rate-limits and /en/api/errors):

* OpenAI: ``x-ratelimit-{limit,remaining,reset}-requests`` (and ``-tokens`` when ``tpm`` is set)
  on every API response, the reset in OpenAI's duration format (``120ms``, ``1s``, ``1.5s``,
  ``6m0s``); a 429 adds ``retry-after-ms`` (ms until the request fits) and ``retry-after`` (whole
  seconds, rounded up); its body is ``{"error": {"message": "Rate limit reached for <model> in
  organization org-fake on requests per min (RPM): Limit L, Used U, Requested 1. Please try again
  in 120ms. ...", "type": "requests"|"tokens", "param": null, "code": "rate_limit_exceeded"}}``.
* Anthropic: ``anthropic-ratelimit-requests-{limit,remaining,reset}`` (and ``-tokens-*``,
  ``-input-tokens-*`` from the one token bucket) on every response, the reset an RFC 3339 UTC
  time; a 429 adds ``retry-after`` (whole seconds, rounded up) and the ``rate_limit_error`` body.
* Gemini sends no rate-limit headers: a 429 ``RESOURCE_EXHAUSTED`` with a ``RetryInfo`` delay.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

ORG = "org-fake"
EPS = 1e-9


def ceil(x: float) -> int:
    """Round up, ignoring float noise (1 - 0.88 is 0.12000000000000001)."""
    return math.ceil(round(x, 6))


@dataclass
class Bucket:
    """A token bucket holding ``max(1, per_minute * burst_s / 60)``, refilled at ``per_minute / 60``/s."""

    per_minute: float
    burst_s: float
    level: float = field(init=False)
    stamp: float = 0.0

    def __post_init__(self) -> None:
        self.level = self.capacity

    @property
    def capacity(self) -> float:
        return max(1.0, self.per_minute * self.burst_s / 60.0)

    @property
    def rate(self) -> float:
        return self.per_minute / 60.0

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + max(0.0, now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, n: float) -> float:
        """Seconds until ``n`` fits (0 when it fits now; inf when it never can)."""
        if n > self.capacity + EPS:
            return math.inf
        return 0.0 if self.level + EPS >= n else (n - self.level) / self.rate

    def reset_s(self) -> float:
        """Seconds until the bucket is full again."""
        return max(0.0, self.capacity - self.level) / self.rate

    def remaining(self) -> int:
        return max(0, math.floor(self.level + EPS))

    def used(self) -> int:
        """How much of the per-minute limit is spent, scaled from the bucket's level."""
        return round(self.per_minute * max(0.0, self.capacity - self.level) / self.capacity)


@dataclass
class Rejection:
    """Why a request was refused: which bucket, what it asked for, how long until it fits."""

    kind: str  # "requests" | "tokens"
    model: str
    limit: float
    used: int
    requested: int
    wait_s: float  # inf: the request can never fit


@dataclass
class Limiter:
    """One server's request and token buckets, and the counts a benchmark reads."""

    rpm: float | None
    tpm: float | None
    burst_s: float = 1.0
    clock: Callable[[], float] = time.monotonic
    requests: Bucket | None = None
    tokens: Bucket | None = None

    def __post_init__(self) -> None:
        if self.burst_s <= 0 or any(v is not None and v <= 0 for v in (self.rpm, self.tpm)):
            raise ValueError("rpm, tpm and burst_s must be positive")
        now = self.clock()
        self.requests = Bucket(self.rpm, self.burst_s, stamp=now) if self.rpm else None
        self.tokens = Bucket(self.tpm, self.burst_s, stamp=now) if self.tpm else None

    def _refill(self) -> None:
        now = self.clock()
        for b in (self.requests, self.tokens):
            if b is not None:
                b.refill(now)

    def admit(self, model: str, tokens: int) -> Rejection | None:
        """Charge one request of ``tokens``; a :class:`Rejection` (nothing charged) when it does not fit."""
        self._refill()
        wait_r = self.requests.wait_for(1) if self.requests else 0.0
        wait_t = self.tokens.wait_for(tokens) if self.tokens else 0.0
        if wait_r > 0 or wait_t > 0:
            wait = max(wait_r, wait_t)
            if wait_r > 0:
                return Rejection("requests", model, self.rpm, self.requests.used(), 1, wait)
            return Rejection("tokens", model, self.tpm, self.tokens.used(), tokens, wait)
        if self.requests:
            self.requests.level -= 1
        if self.tokens:
            self.tokens.level -= tokens
        return None

    def charge_tokens(self, n: int) -> None:
        """Charge tokens known only after the reply (the bucket may go below zero)."""
        if self.tokens and n > 0:
            self._refill()
            self.tokens.level -= n


# --- OpenAI's shapes ---------------------------------------------------------------------------


def duration(seconds: float) -> str:
    """OpenAI's duration format: ``120ms``, ``1s``, ``1.5s``, ``6m0s``, ``1h2m3s``."""
    ms = ceil(seconds * 1000)
    if ms < 1000:
        return f"{max(ms, 0)}ms"
    s = ms / 1000
    if s < 60:
        return f"{s:g}s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    head = f"{int(h)}h" if h else ""
    return f"{head}{int(m)}m{round(sec, 3):g}s"


def number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _headers(
    lim: Limiter,
    kinds: tuple[str, ...],
    name: Callable[[str, str], str],
    reset: Callable[[float], str],
) -> dict[str, str]:
    """``name(kind, field)`` → value for each bucket kind (``tokens``-like kinds read the token bucket)."""
    out: dict[str, str] = {}
    for kind in kinds:
        b, per_minute = (lim.requests, lim.rpm) if kind == "requests" else (lim.tokens, lim.tpm)
        if b is not None:
            out[name(kind, "limit")] = number(per_minute)
            out[name(kind, "remaining")] = str(b.remaining())
            out[name(kind, "reset")] = reset(b.reset_s())
    return out


def openai_headers(lim: Limiter) -> dict[str, str]:
    return _headers(
        lim, ("requests", "tokens"), lambda kind, f: f"x-ratelimit-{f}-{kind}", duration
    )


def openai_rejection(rej: Rejection) -> tuple[dict, dict[str, str]]:
    """The 429 body and its retry headers, as OpenAI sends them."""
    unit = "requests per min (RPM)" if rej.kind == "requests" else "tokens per min (TPM)"
    more = "Visit https://platform.openai.com/account/rate-limits to learn more."
    if math.isinf(rej.wait_s):
        message = (
            f"Request too large for {rej.model} in organization {ORG} on {unit}: Limit {number(rej.limit)}, "
            f"Requested {rej.requested}. The input or output tokens must be reduced in order to run "
            f"successfully. {more}"
        )
        headers: dict[str, str] = {}
    else:
        message = (
            f"Rate limit reached for {rej.model} in organization {ORG} on {unit}: Limit {number(rej.limit)}, "
            f"Used {rej.used}, Requested {rej.requested}. Please try again in {duration(rej.wait_s)}. {more}"
        )
        headers = {
            "retry-after-ms": str(ceil(rej.wait_s * 1000)),
            "retry-after": str(ceil(rej.wait_s)),
        }
    body = {
        "error": {
            "message": message,
            "type": rej.kind,
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    return body, headers


# --- Anthropic's and Gemini's shapes -------------------------------------------------------------


def rfc3339(seconds_from_now: float) -> str:
    """The UTC time ``seconds_from_now`` ahead, RFC 3339, rounded up to the second (as Anthropic sends)."""
    at = datetime.now(UTC) + timedelta(seconds=seconds_from_now)
    if at.microsecond:
        at = at.replace(microsecond=0) + timedelta(seconds=1)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def anthropic_headers(lim: Limiter) -> dict[str, str]:
    return _headers(
        lim,
        ("requests", "tokens", "input-tokens"),
        lambda kind, f: f"anthropic-ratelimit-{kind}-{f}",
        rfc3339,
    )


def anthropic_rejection(rej: Rejection) -> tuple[str, dict[str, str]]:
    """The 429 message and its ``retry-after`` header (none when the request can never fit)."""
    unit = "requests per minute" if rej.kind == "requests" else "input tokens per minute"
    message = (
        f"This request would exceed your organization's rate limit of {number(rej.limit)} {unit} "
        f"(org: {ORG}, model: {rej.model}). For details, refer to: https://docs.claude.com/en/api/rate-limits. "
        "You can see the response headers for current usage. Please reduce the prompt length or the maximum "
        "tokens requested, or try again later."
    )
    headers = {} if math.isinf(rej.wait_s) else {"retry-after": str(ceil(rej.wait_s))}
    return message, headers


def gemini_rejection(rej: Rejection) -> tuple[str, list[dict]]:
    """The 429 message and its ``RetryInfo`` detail (none when the request can never fit)."""
    unit = "requests per minute" if rej.kind == "requests" else "input tokens per minute"
    message = (
        f"You exceeded your current quota, please check your plan and billing details. Quota exceeded for "
        f"metric: generate_content_{rej.kind}, limit: {number(rej.limit)} {unit}, model: {rej.model}."
    )
    if math.isinf(rej.wait_s):
        return message, []
    return f"{message} Please retry in {rej.wait_s:.3f}s.", [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{rej.wait_s:.3f}s"}
    ]
