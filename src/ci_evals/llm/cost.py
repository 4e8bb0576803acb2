"""What an LLM call returned and what it cost: :class:`LLMResult` and :class:`Tally`.

Token usage is counted per call (zero on a cache hit: nothing was spent), priced by
:func:`ci_evals.llm.prices.price` (the suite's ``pricing``, then the price list) and summed by a
:class:`Tally` into the grade/trajectory metadata keys the runner aggregates: ``usage``,
``cache_hits``, ``retries``, ``cost_usd`` (what the priced calls cost), ``unpriced`` (the models
that spent tokens with no known price), ``throttled``. No I/O, so graders, targets and the
aggregator can use it anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ci_evals.llm.prices import price, suite_price

if TYPE_CHECKING:
    from ci_evals.llm.errors import LLMError


MAX_CALL_TOKENS = 1_000_000_000
"""The most tokens one call may say it used: no model reads or writes a billion tokens in one call,
so a larger count (a 301-digit number, 1e999) is a server's mistake, read as this bound."""


def tokens(value: Any) -> int:
    """A token count a server reported, read fail-closed: an int or a finite float, clamped to
    ``[0, MAX_CALL_TOKENS]``; anything else (a string, a list, NaN, a bool, None) is 0. Never raises."""
    if type(value) is int:  # the usual case first; a bool (an int subclass) is no count
        return value if 0 <= value <= MAX_CALL_TOKENS else (0 if value < 0 else MAX_CALL_TOKENS)
    if type(value) is float and math.isfinite(value):
        return int(min(max(value, 0.0), MAX_CALL_TOKENS))
    return 0


def usage_of(data: Any) -> dict[str, int]:
    """The tokens a response says it used (``usage.prompt_tokens`` / ``completion_tokens``),
    each read by :func:`tokens`: a malformed ``usage`` (a string, a list, NaN, 1e999) counts 0 and
    never raises, so no answer can fail a call after the server answered it."""
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return {"prompt_tokens": 0, "completion_tokens": 0}
    return {
        "prompt_tokens": tokens(usage.get("prompt_tokens")),
        "completion_tokens": tokens(usage.get("completion_tokens")),
    }


def _zero_usage() -> dict[str, int]:
    return {"prompt_tokens": 0, "completion_tokens": 0}


@dataclass(slots=True)
class LLMResult:
    """One call's response JSON, whether it came from the cache, retries taken, tokens spent.

    ``usage`` counts tokens spent by this call: zero on a cache hit (the response's own usage
    stays in ``data["usage"]``).
    """

    data: dict[str, Any]
    cache_hit: bool = False
    retries: int = 0
    usage: dict[str, int] = field(default_factory=_zero_usage)
    throttled: int = 0
    """Throttling answers (429/503/529) this call waited out: waits, not ``retries`` (which count
    the ``max_retries`` budget used)."""
    waited_s: float = 0.0
    """Seconds this call waited in ci-evals' own queue (for a slot of its endpoint) and in rate-limit
    pauses (pacing, ``Retry-After`` after 429/503/529): not the server's time, nor the backoff
    after a 5xx or a timeout (the target's latency; its retries are counted)."""
    model: str | None = None
    """The model the call asked for, set by the client that priced it (None: built elsewhere)."""
    cost_usd: float | None = None
    """What the call cost as the client priced it (0.0 for a cache hit); None when no price is
    known for ``model`` (or the result was not built by a client)."""

    @property
    def message(self) -> dict[str, Any]:
        """The first choice's message (``{}`` when there is none)."""
        choices = self.data.get("choices") or [{}]
        return (choices[0] or {}).get("message") or {}

    @property
    def content(self) -> str:
        return self.message.get("content") or ""

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Tool calls in the chat-completions shape ``{id, type, function: {name, arguments}}``."""
        return list(self.message.get("tool_calls") or [])

    @property
    def embeddings(self) -> list[list[float]]:
        """Embedding vectors, in input order."""
        return [
            d["embedding"]
            for d in sorted(self.data.get("data") or [], key=lambda d: d.get("index", 0))
        ]


@dataclass(slots=True)
class Tally:
    """Sums what a grade or a trajectory's calls cost; :meth:`metadata` gives the runner's keys.

    ``priced_usd`` is what the priced calls cost; ``unpriced`` the models that spent tokens with
    no known price. :attr:`cost_usd` is the calls' cost when every one is known, else None: an
    unknown cost is never reported as a number (fail closed). ``waited_s`` sums the calls' own
    waits (queue and rate-limit pauses, see :attr:`LLMResult.waited_s`).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    retries: int = 0
    calls: int = 0
    priced_usd: float = 0.0
    throttled: int = 0
    waited_s: float = 0.0
    unpriced: set[str] = field(default_factory=set)

    def add(
        self, result: LLMResult, model: str | None = None, pricing: dict[str, Any] | None = None
    ) -> LLMResult:
        """Count one answered call. Its cost: the suite's ``pricing`` when given and it prices the
        model, else what the client priced it at, else :func:`~ci_evals.llm.prices.price`."""
        self.calls += 1
        self.cache_hits += int(result.cache_hit)
        self.retries += result.retries
        self.throttled += result.throttled
        self.waited_s += result.waited_s
        usage = result.usage
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)
        name = result.model or model or ""
        cost = suite_price(name, usage, pricing) if pricing else None
        if cost is None:
            cost = result.cost_usd if result.model is not None else price(name, usage)
        if cost is None:
            self.unpriced.add(name or "(unnamed model)")
        else:
            self.priced_usd += cost
        return result

    def add_error(self, error: LLMError) -> None:
        """Count one call that failed for good (it spent nothing known)."""
        self.calls += 1
        self.retries += error.retries
        self.throttled += error.throttled
        self.waited_s += error.waited_s

    @property
    def usage(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}

    @property
    def cost_usd(self) -> float | None:
        """What the calls cost (0.0 for none, or only cache hits); None when a call spent tokens on
        a model with no known price (see ``unpriced``; ``priced_usd`` is the known part)."""
        return None if self.unpriced else self.priced_usd

    @property
    def cached(self) -> bool:
        """Every call was answered from the cache (False when there was none)."""
        return self.calls > 0 and self.cache_hits == self.calls

    def metadata(self) -> dict[str, Any]:
        """``{usage, cache_hits, retries}``, ``throttled`` when calls waited out 429/503/529
        answers, then ``cost_usd`` when every call was priced, else ``unpriced`` (the sorted names
        of the models that spent tokens with no known price) and no ``cost_usd``."""
        meta: dict[str, Any] = {
            "usage": self.usage,
            "cache_hits": self.cache_hits,
            "retries": self.retries,
        }
        if self.throttled:
            meta["throttled"] = self.throttled
        if self.unpriced:
            meta["unpriced"] = sorted(self.unpriced)
        else:
            meta["cost_usd"] = self.priced_usd
        return meta
