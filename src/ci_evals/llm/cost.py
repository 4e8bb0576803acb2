"""What an LLM call returned and what it cost: :class:`LLMResult`, :class:`Tally`, :func:`cost_usd`.

Token usage is counted per call (zero on a cache hit: nothing was spent) and summed by a
:class:`Tally` into the grade/trajectory metadata keys the runner aggregates: ``usage``,
``cache_hits``, ``retries``, ``throttled`` (and ``cost_usd`` when the suite prices the model).
Pure data: no I/O, so graders, targets and the aggregator can use it anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ci_evals.llm.errors import LLMError


def cost_usd(model: str, usage: dict[str, int], pricing: dict[str, Any] | None) -> float | None:
    """Dollar cost of ``usage`` under ``pricing`` ({model: {input_per_mtok, output_per_mtok}}).

    The price is looked up by exact model name, then without a ``provider/`` prefix, then by the
    longest priced name the model starts with (``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``).
    None when the model has no price.
    """
    if not pricing:
        return None
    bare = model.rsplit("/", 1)[-1]
    price = pricing.get(model) or pricing.get(bare)
    if price is None:
        prefixes = [k for k in pricing if bare.startswith(k) or model.startswith(k)]
        price = pricing[max(prefixes, key=len)] if prefixes else None
    if price is None:
        return None

    def rate(name: str) -> float:
        value = price.get(name) if isinstance(price, dict) else getattr(price, name, None)
        return float(value or 0.0)

    return (
        usage.get("prompt_tokens", 0) * rate("input_per_mtok")
        + usage.get("completion_tokens", 0) * rate("output_per_mtok")
    ) / 1_000_000


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
    """Sums what a grade or a trajectory's calls cost; :meth:`metadata` gives the runner's keys."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    retries: int = 0
    calls: int = 0
    cost_usd: float | None = None
    throttled: int = 0

    def add(
        self, result: LLMResult, model: str | None = None, pricing: dict[str, Any] | None = None
    ) -> LLMResult:
        self.calls += 1
        self.cache_hits += int(result.cache_hit)
        self.retries += result.retries
        self.throttled += result.throttled
        self.prompt_tokens += result.usage.get("prompt_tokens", 0)
        self.completion_tokens += result.usage.get("completion_tokens", 0)
        cost = cost_usd(model, result.usage, pricing) if model and pricing else None
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost
        return result

    def add_error(self, error: LLMError) -> None:
        self.calls += 1
        self.retries += error.retries
        self.throttled += error.throttled

    @property
    def usage(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}

    def metadata(self) -> dict[str, Any]:
        """``{usage, cache_hits, retries}`` plus ``cost_usd`` when the model was priced and
        ``throttled`` when calls waited out 429/503/529 answers."""
        meta: dict[str, Any] = {
            "usage": self.usage,
            "cache_hits": self.cache_hits,
            "retries": self.retries,
        }
        if self.throttled:
            meta["throttled"] = self.throttled
        if self.cost_usd is not None:
            meta["cost_usd"] = self.cost_usd
        return meta
