"""One scheduler per LLM endpoint: how many calls go out, when, and when to stop calling.

Every call to an endpoint (a provider, base URL and key; shared by the target and every grader
in the run) passes through its :class:`Endpoint`:

* **Adaptive in-flight limit (AIMD).** The limit starts at ``max_concurrent`` and stays between
  1 and it: halved on a throttling answer (429, or an overloaded 503/529), at most once per
  round trip (only a call sent after the last cut can cut again, as TCP does), and raised by
  ``1/limit`` per success, so by about one per round trip. Calls wait for a slot in arrival order.
* **One pause per throttle.** A 429 pauses the whole endpoint until the time the server named
  (``retry-after-ms`` / ``Retry-After``; a short backoff when it named none), instead of every
  worker retrying on its own clock. After a pause one call goes first; the others follow when it
  succeeds, so waiting calls are released in order, not all at once.
* **Pacing before the limit** (:mod:`ci_evals.llm.pace`, :mod:`ci_evals.llm.limits`). A request bucket (and a token bucket) paces calls at the rate the
  user set (``rpm``/``tpm``) or the server announced (OpenAI's ``x-ratelimit-limit-*``,
  Anthropic's ``anthropic-ratelimit-*``): a call starts when the bucket can pay for it, with one
  second of burst (OpenAI enforces per-minute limits over short windows). A server saying
  ``remaining: 0`` pauses the endpoint until one request fits.
* **A 429 is a wait, not a failure**: throttling answers never use a call's retry budget. A call
  gives up on throttling only when its next wait would end past ``max_wait`` seconds from its
  first throttling answer; its error then says so.
* **No wait the server sets passes ``max_wait``, and none is zero.** Every number a server
  announces is read bounded (:mod:`ci_evals.llm.limits`, :func:`ci_evals.llm.cost.tokens`), and
  :meth:`Endpoint._bounded` is the one check of what it would make the run wait: a ``Retry-After``,
  a reset learned from a success's ``remaining: 0``, the time one call costs at an announced (or
  set) rate. Longer than ``max_wait`` stops the endpoint at once with the line that says why (every
  call would get the same answer: an absurd header never freezes the run). A pause after a
  throttling answer is at least ``WAIT_FLOOR``, doubling once per round trip while they continue,
  so ``Retry-After: 0`` (or a date in the past) never turns 429s into a request storm. Tokens a
  server reports can put the token bucket at most ``max_wait`` into debt.
* **A breaker for systematic failures** (:mod:`ci_evals._util.breaker`): while an endpoint has
  never answered successfully, a run of calls failing for the same cause that no retry fixes
  opens it, and every later call fails at once with that cause, without being sent. So does an
  endpoint that has answered nothing but "overloaded" (503/529) for ``OVERLOADED_GIVE_UP``
  seconds since its first such answer, without one success; a burst of them followed by a
  success never does.

:meth:`Endpoint.report` gives what the summary shows (rejected calls, seconds waited, the
concurrency it settled on, the limits it learned, why it stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ci_evals._util.breaker import Breaker
from ci_evals.llm.limits import Limits
from ci_evals.llm.pace import Pace

if TYPE_CHECKING:  # the summary.json type only: importing ci_evals.llm loads no pydantic
    from ci_evals.results.records import EndpointReport

PAUSE_FIRST = 1.0
"""Seconds a 429 with no ``Retry-After`` pauses the endpoint; doubles while 429s continue."""
PAUSE_CAP = 30.0
WAIT_FLOOR = 0.1
"""Seconds: the shortest pause after a throttling answer, whatever the server asked (0, a date in
the past); it doubles once per round trip while throttling answers continue, up to ``PAUSE_CAP``,
and a success resets it."""
THROTTLE_STATUS = frozenset({429, 503, 529})
OVERLOADED = frozenset({503, 529})
OVERLOADED_GIVE_UP = 60.0
"""Seconds of nothing but "overloaded" answers (503/529, at least ``OVERLOADED_MIN`` of them) from an
endpoint that has never answered a call successfully, after which the run stops calling it: a
server that is down behind a proxy answers 503 forever, and ``max_wait`` (600 s) per call would
hold the whole run for it. Once one call succeeded, overload answers are waits again, bounded
by ``max_wait`` alone."""
OVERLOADED_MIN = 3


class EndpointStopped(Exception):
    """The breaker is open: the call was not sent. ``cause`` is the one line that says why."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class ThrottledOut(Exception):
    """A call gave up on throttling (``max_wait`` passed, or the server asked for longer)."""


@dataclass
class Ticket:
    """One call's passage: when it was admitted (to tell which throttles it may answer for)."""

    seq: int
    first_throttle: float | None = None
    waited: float = 0.0
    tokens: float = 0.0
    settled: bool = False
    """Its slot was given back: every outcome gives it back once, whatever else fails."""


@dataclass
class Endpoint:
    """The scheduler of one endpoint (see the module docstring). Not thread-safe: one event loop."""

    name: str
    limits: Limits = field(default_factory=Limits)
    provider: str = "openai"

    def __post_init__(self) -> None:
        self.cap = max(1, int(self.limits.max_concurrent))
        self.limit = float(self.cap)
        self.in_flight = 0
        self.queue: deque[asyncio.Future] = deque()
        self.paused_until = 0.0
        self.pause_step = PAUSE_FIRST
        self.floor_step = WAIT_FLOOR
        self.probing = False  # after a pause: one call goes first
        self.seq = 0
        self.cut_seq = -1
        self.pace = Pace(self.limits, self.provider, self._bounded)
        self.breaker = Breaker()
        self.calls = 0
        self.rejected = 0
        self.waited = 0.0
        self._holding = 0
        self._held_since = 0.0
        self.min_limit = self.limit
        self.overloaded_since: float | None = (
            None  # the first 503/529, while nothing ever succeeded
        )
        self.overloaded = 0
        with contextlib.suppress(
            ThrottledOut
        ):  # a set rate too slow for max_wait: stopped, said by every call
            self.pace.use_settings()

    # -- admission -------------------------------------------------------------------------------

    def _effective(self) -> int:
        return 1 if self.probing else max(1, int(self.limit))

    async def acquire(self, tokens: float = 0.0, *, front: bool = False) -> Ticket:
        """Wait for a slot, the pause and the pace; raise :class:`EndpointStopped` when stopped.

        ``front``: a call coming back after a throttle or a retry waits ahead of new calls.
        """
        if self.stopped:
            raise EndpointStopped(self.stopped)
        if self.in_flight >= self._effective() or self.queue:
            fut = asyncio.get_running_loop().create_future()
            if front:
                self.queue.appendleft(fut)
            else:
                self.queue.append(fut)
            try:
                await fut
            except BaseException:
                if fut in self.queue:
                    self.queue.remove(fut)
                elif fut.done() and not fut.cancelled():
                    self.in_flight -= 1  # a slot was handed over to us: give it on
                    self._wake()
                raise
        else:
            self.in_flight += 1
        try:
            if self.stopped:
                raise EndpointStopped(self.stopped)
            await self._pace(tokens)
        except ThrottledOut as out:  # the call's own pace passed max_wait: stopped, and not sent
            self._release()
            raise EndpointStopped(str(out)) from None
        except BaseException:
            self._release()
            raise
        self.seq += 1
        self.calls += 1
        return Ticket(self.seq, tokens=tokens)

    async def _pace(self, tokens: float) -> None:
        while True:
            now = time.monotonic()
            if self.paused_until > now:
                await self._hold(self.paused_until - now)
                continue
            wait = self.pace.reserve(tokens, now)
            if wait > 0:
                await self._hold(wait)
            if self.paused_until <= time.monotonic():
                return

    async def _hold(self, seconds: float) -> None:
        """Sleep for pacing or a pause; ``waited`` counts the wall time any call was held."""
        if self._holding == 0:
            self._held_since = time.monotonic()
        self._holding += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            self._holding -= 1
            if self._holding == 0:
                self.waited += time.monotonic() - self._held_since

    def waited_so_far(self) -> float:
        """Seconds any call was held, the hold going on now included (the progress line asks mid-run,
        when paced calls keep some call held from the first to the last)."""
        return self.waited + (time.monotonic() - self._held_since if self._holding else 0.0)

    def _wake(self) -> None:
        while self.queue and self.in_flight < self._effective():
            fut = self.queue.popleft()
            if not fut.done():
                self.in_flight += 1
                fut.set_result(None)

    def _release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _settle(self, ticket: Ticket | None) -> None:
        """Give a call's slot back, once (a ticket already settled gives nothing back)."""
        if ticket is None or ticket.settled:
            return
        ticket.settled = True
        self._release()

    # -- the one bound on waits ------------------------------------------------------------------

    def _bounded(self, seconds: float, why: str) -> None:
        """The one check of a wait the server's word (or the user's rate) would impose: longer than
        ``max_wait`` stops the endpoint (no later call is sent) and raises :class:`ThrottledOut`."""
        if seconds > self.limits.max_wait:
            out = f"rate limited: {why}, more than max_wait {self.limits.max_wait:g} s allows"
            self._stop(out)
            raise ThrottledOut(out)

    # -- outcomes --------------------------------------------------------------------------------

    def _learn(self, headers: Any) -> None:
        """Take the rates a response announced; pause when it says ``remaining: 0`` (see :meth:`Pace.learn`)."""
        until = self.pace.learn(headers, PAUSE_FIRST, PAUSE_CAP)
        if until is not None:
            self.paused_until = max(self.paused_until, time.monotonic() + until)

    @property
    def stopped(self) -> str | None:
        return self.breaker.stopped

    @property
    def successes(self) -> int:
        return self.breaker.successes

    def success(
        self, ticket: Ticket, headers: Any = None, tokens_used: float | None = None
    ) -> None:
        """The call got a usable answer. Its slot is given back first, whatever its headers say
        (an announcement that stops the endpoint is only news for later calls)."""
        self.breaker.success()
        self.pause_step = PAUSE_FIRST
        self.floor_step = WAIT_FLOOR
        self.limit = min(float(self.cap), self.limit + 1.0 / self.limit)
        self.probing = False
        self._settle(ticket)
        if tokens_used is not None:
            self.pace.charge(tokens_used - ticket.tokens)
        with contextlib.suppress(ThrottledOut):  # stopped: every later call says why
            self._learn(headers)

    def throttled(self, ticket: Ticket, asked: float | None, headers: Any = None) -> float:
        """A 429/503/529 answer: cut the limit (once per round trip), pause the endpoint.

        Returns the seconds until the endpoint resumes. Raises :class:`ThrottledOut` when this
        call's ``max_wait`` would pass first.
        """
        now = time.monotonic()
        self.rejected += 1
        self._settle(ticket)
        floor = self.floor_step
        if ticket.seq > self.cut_seq:  # once per round trip: the limit halves, the floor doubles
            self.limit = max(1.0, math.floor(self.limit / 2))
            self.min_limit = min(self.min_limit, self.limit)
            self.cut_seq = self.seq
            self.floor_step = min(PAUSE_CAP, self.floor_step * 2)
        pause = max(asked, floor) if asked is not None else self.pause_step
        if asked is None:
            self.pause_step = min(PAUSE_CAP, self.pause_step * 2)
        if ticket.first_throttle is None:
            ticket.first_throttle = now
        budget = self.limits.max_wait - (now - ticket.first_throttle)
        if asked is not None:  # every call would get the same answer: none is sent
            self._bounded(asked, f"the server asked to wait {asked:g} s")
        self._learn(headers)
        if pause > budget:
            raise ThrottledOut(
                f"rate limited: still throttled after {now - ticket.first_throttle:.0f} s "
                f"(max_wait {self.limits.max_wait:g} s)"
            )
        self.paused_until = max(self.paused_until, now + pause)
        self.probing = True
        return pause

    def overloaded_answer(self, status: int) -> None:
        """A 503/529 answer, after :meth:`throttled` handled it as a wait: while the endpoint has never
        answered successfully, raise :class:`ThrottledOut` and stop it once such answers have lasted
        ``OVERLOADED_GIVE_UP`` seconds (no later call is sent)."""
        if self.breaker.successes or status not in OVERLOADED:
            return
        now = time.monotonic()
        if self.overloaded_since is None:
            self.overloaded_since = now
        self.overloaded += 1
        lasted = now - self.overloaded_since
        if lasted >= OVERLOADED_GIVE_UP and self.overloaded >= OVERLOADED_MIN:
            out = (
                f"stopped calling {self.name}: the server kept answering overloaded (HTTP {status}) for "
                f"{lasted:.0f} s, {self.overloaded} answers and not one success (check that the server is "
                "up and can serve this model)"
            )
            self._stop(out)
            raise ThrottledOut(out)

    def failed(self, ticket: Ticket | None, kind: str | None, message: str) -> None:
        """A final failure of a call (after its retries); ``kind`` names a systematic cause or None."""
        self._settle(ticket)
        if self.breaker.failure(kind, message):
            self._stop(message)

    def _stop(self, message: str) -> None:
        self.breaker.trip(message)
        for fut in list(self.queue):  # the waiting calls learn it at once
            if not fut.done():
                self.in_flight += 1
                fut.set_result(None)
        self.queue.clear()

    def abandon(self, ticket: Ticket) -> None:
        """The call ended without an outcome (cancelled, an unexpected error, or to be retried after a
        backoff): its slot is given back, once."""
        self._settle(ticket)

    # -- what the summary shows ------------------------------------------------------------------

    def report(self) -> EndpointReport:
        """summary.json's ``endpoints[]`` entry of this endpoint."""
        out: EndpointReport = {
            "endpoint": self.name,
            "provider": self.provider,
            "calls": self.calls,
            "rejected": self.rejected,
            "waited_s": round(self.waited_so_far(), 3),
            "max_concurrent": self.cap,
            "concurrency": int(self.limit),
            "lowest_concurrency": int(self.min_limit),
        }
        out.update(self.pace.rates())
        if self.stopped:
            out["stopped"] = self.stopped  # asked of results/records
        return out
