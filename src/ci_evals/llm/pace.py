"""One endpoint's pace: the request and token buckets its calls start by, and where their rates come from.

A request bucket (and a token bucket) paces calls at the rate the user set (``rpm``/``tpm``) or
the server announced (OpenAI's ``x-ratelimit-limit-*``, Anthropic's ``anthropic-ratelimit-*``):
a call starts when the bucket can pay for it (:mod:`ci_evals.llm.limits`). The wait a rate would
impose is checked by the endpoint's one bound (``bounded``, :meth:`ci_evals.llm.scheduler.Endpoint._bounded`):
longer than ``max_wait`` stops the endpoint, with the line that names the rate and where it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ci_evals.llm.limits import Announced, Bucket, Limits, announced

if TYPE_CHECKING:  # the summary.json type only: importing ci_evals.llm loads no pydantic
    from ci_evals.results.records import EndpointReport

Bound = Callable[[float, str], None]
"""The endpoint's one check of a wait: (seconds, why) -> None, or raise after stopping it."""


class Pace:
    """The buckets of one endpoint (see the module docstring). Not thread-safe: one event loop."""

    def __init__(self, limits: Limits, provider: str, bounded: Bound) -> None:
        self.max_wait = limits.max_wait
        self.provider = provider
        self.bounded = bounded
        self.req_bucket: Bucket | None = None
        self.tok_bucket: Bucket | None = None
        self.user_rpm = limits.rpm
        self.user_tpm = limits.tpm
        self.announced: Announced | None = None

    def use_settings(self) -> None:
        """Pace by the rates the user set (the check of each may stop the endpoint)."""
        if self.user_rpm:
            self._new_bucket("rpm", self.user_rpm)
        if self.user_tpm:
            self._new_bucket("tpm", self.user_tpm)

    def reserve(self, tokens: float, now: float) -> float:
        """Take one request and ``tokens`` from the buckets now: the seconds until the call may start."""
        wait = 0.0
        if self.req_bucket is not None:
            wait = max(wait, self.req_bucket.reserve(1.0, now))
        if self.tok_bucket is not None and tokens:
            own = tokens / self.tok_bucket.rate
            self.bounded(
                own,
                f"a call of about {tokens:.0f} tokens takes {own:.3g} s at "
                f"{self._rate_words('tpm')}",
            )
            wait = max(wait, self.tok_bucket.reserve(tokens, now))
        return wait

    def charge(self, delta: float) -> None:
        """Charge (or refund) the token bucket the tokens a call used beyond its estimate."""
        if self.tok_bucket is not None:
            self.tok_bucket.adjust(delta)

    def _rate_words(self, which: str) -> str:
        user = self.user_rpm if which == "rpm" else self.user_tpm
        bucket = self.req_bucket if which == "rpm" else self.tok_bucket
        unit = "requests" if which == "rpm" else "tokens"
        header = (
            ("x-ratelimit-limit-requests" if which == "rpm" else "x-ratelimit-limit-tokens")
            if self.provider != "anthropic"
            else f"anthropic-ratelimit-{unit}-limit"
        )
        source = "your setting" if user else f"announced by the server in {header}"
        return f"{bucket.per_minute:g} {unit} a minute ({source})" if bucket else "no limit"

    def _new_bucket(self, which: str, per_minute: float) -> Bucket:
        """A pacing bucket, refused (the endpoint stopped) when one request at its rate takes longer
        than ``max_wait``: ``x-ratelimit-limit-requests: 0.001`` would hold each call 17 hours."""
        bucket = Bucket(per_minute, max_debt_s=self.max_wait)
        if which == "rpm":
            self.req_bucket = bucket
            self.bounded(
                1.0 / bucket.rate,
                f"one request every {1.0 / bucket.rate:.3g} s at {self._rate_words('rpm')}",
            )
        else:
            self.tok_bucket = bucket
        return bucket

    def learn(self, headers: Any, pause_first: float, pause_cap: float) -> float | None:
        """Take the rates a response announced. Returns the seconds to pause the endpoint when the
        server says ``remaining: 0`` and no announced limit paces for it (``pause_first`` when it
        names no reset, at most ``pause_cap``), else None."""
        info = announced(headers)
        if info is None:
            return None
        self.announced = info
        if (
            info.tpm
            and not self.user_tpm
            and (self.tok_bucket is None or self.tok_bucket.per_minute != info.tpm)
        ):
            self._new_bucket("tpm", info.tpm)
        if (
            info.rpm
            and not self.user_rpm
            and (self.req_bucket is None or self.req_bucket.per_minute != info.rpm)
        ):
            self._new_bucket(
                "rpm", info.rpm
            ).level = 0.0  # the calls already sent spent what the window held
        if (
            info.remaining_requests is not None
            and info.remaining_requests < 1
            and self.req_bucket is None
        ):
            # an empty bucket we cannot pace for (no limit announced): wait until it refills
            until = min(
                info.reset_requests if info.reset_requests is not None else pause_first, pause_cap
            )
            self.bounded(until, f"the server's request limit (remaining 0) resets in {until:g} s")
            return until
        return None

    def rates(self) -> EndpointReport:
        """The rates the endpoint was paced by, for its report: ``rpm``/``tpm`` and where each came
        from (``settings`` or ``server``); none when it had none."""
        # (the ignores: results/records' EndpointReport does not list these documented keys yet)
        out: EndpointReport = {}
        rpm = self.user_rpm or (self.announced.rpm if self.announced else None)
        tpm = self.user_tpm or (self.announced.tpm if self.announced else None)
        if rpm:
            out["rpm"] = rpm
            out["rpm_from"] = "settings" if self.user_rpm else "server"
        if tpm:
            out["tpm"] = tpm
            out["tpm_from"] = "settings" if self.user_tpm else "server"
        return out
