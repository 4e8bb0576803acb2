"""What one LLM call cost: the suite's ``pricing`` first, then a maintained price list.

:func:`price` is the one place a call is priced. The suite's ``pricing`` (``{model:
{input_per_mtok, output_per_mtok}}``) wins, looked up by exact name, then without a ``provider/``
prefix, then by the longest priced name the model starts with (:func:`suite_price`). Else
pydantic's ``genai-prices`` (its bundled snapshot; never a network fetch, never ``UpdatePrices``):
the provider is the one whose API the base URL is (``api.openai.com``, ``api.anthropic.com``,
``generativelanguage.googleapis.com``, ``openrouter.ai``, ...), or the one a ``provider/model``
name names (Letta's ``openai/gpt-4o-mini``), or genai-prices matches the model name alone (a
local server serving ``gpt-4o-mini`` is priced as OpenAI's), OpenAI's list last (the wire is
OpenAI's; its name matching misses ``text-embedding-3-small``). None when no price is known; a call
that spent no tokens (a cache hit) costs 0.0 whatever its model.

Importing genai-prices costs about 0.25 s (its price data): it is imported on the first call that
needs it, and :func:`warm` imports it on a background thread when an LLM client starts, so the
run's first call does not pay it on the event loop; unless today's memo of the list's answers
(:mod:`ci_evals.llm.price_memo`) has some, in which case only a call to a model it lacks imports it.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from decimal import Decimal
from importlib import metadata
from typing import TYPE_CHECKING, Any

from ci_evals._util.quiet import when_quiet
from ci_evals.llm.price_memo import Memo
from ci_evals.usercode.load import loaded_paths

if TYPE_CHECKING:
    from types import ModuleType

PACKAGE = "genai-prices"

_warm_lock = threading.Lock()
_warm_thread: threading.Thread | None = None
_warm_task: asyncio.Task[None] | None = None


def suite_price(model: str, usage: dict[str, int], pricing: dict[str, Any] | None) -> float | None:
    """Dollar cost of ``usage`` under the suite's ``pricing`` ({model: {input_per_mtok,
    output_per_mtok}}): by exact model name, then without a ``provider/`` prefix, then by the
    longest priced name the model starts with (``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``).
    None when the suite does not price the model."""
    if not pricing:
        return None
    bare = model.rsplit("/", 1)[-1]
    rates = pricing.get(model) or pricing.get(bare)
    if rates is None:
        prefixes = [k for k in pricing if bare.startswith(k) or model.startswith(k)]
        rates = pricing[max(prefixes, key=len)] if prefixes else None
    if rates is None:
        return None

    def rate(name: str) -> float:
        value = rates.get(name) if isinstance(rates, dict) else getattr(rates, name, None)
        return float(value or 0.0)

    return (
        usage.get("prompt_tokens", 0) * rate("input_per_mtok")
        + usage.get("completion_tokens", 0) * rate("output_per_mtok")
    ) / 1_000_000


def price(
    model: str,
    usage: dict[str, int],
    pricing: dict[str, Any] | None = None,
    base_url: str | None = None,
) -> float | None:
    """What a call to ``model`` that used ``usage`` (``prompt_tokens``, ``completion_tokens``)
    cost in USD: the suite's ``pricing`` first, then genai-prices (see the module docstring).
    None when no price is known; 0.0 for a call that spent no tokens."""
    cost = suite_price(model, usage, pricing)
    if cost is not None:
        return cost
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    if not prompt and not completion:
        return 0.0
    if not model:
        return None
    try:
        return _listed(model, prompt, completion, base_url)
    except Exception:  # the list failing on an odd name never fails a call it answered: unknown
        return None


def _listed(model: str, prompt: int, completion: int, base_url: str | None) -> float | None:
    """The price list's cost of the call, or None when it knows no price for ``model``: from
    today's memo of its answers when it has the pair (no import), else from the list (kept in the
    memo when the price is flat, or unknown)."""
    memo = _the_memo()
    kept = memo.get(model, base_url)
    if kept is None:  # the list knew no price today
        return None
    if isinstance(kept, tuple):
        return _flat(kept, prompt, completion)
    found = _resolve(model, base_url)
    rates = None if found is None else _linear(model, base_url)
    if found is None or rates is not None:  # (a tiered price is never kept)
        memo.put(model, base_url, rates)
    if found is None:
        return None
    if rates is not None:  # a flat price per token: no need for the list's general calculator
        return _flat(rates, prompt, completion)
    provider, info = found
    usage = _genai_prices().Usage(input_tokens=prompt, output_tokens=completion)
    return float(info.calc_price(usage, provider).total_price)


def _flat(rates: tuple[Decimal, Decimal], prompt: int, completion: int) -> float:
    """A call's cost at flat (input, output) dollars per million tokens, in exact decimals."""
    return float((prompt * rates[0] + completion * rates[1]) / 1_000_000)


@functools.lru_cache(maxsize=256)
def _linear(model: str, base_url: str | None) -> tuple[Decimal, Decimal] | None:
    """(input, output) dollars per million tokens when the model's price today is flat (one
    number each, no tiers by prompt size), else None: its general calculator then prices each
    call (a tenth of a millisecond, most of what pricing a call costs)."""
    found = _resolve(model, base_url)
    if found is None:
        return None
    from datetime import UTC, datetime

    prices = found[1].get_prices(datetime.now(tz=UTC))
    given, made = getattr(prices, "input_mtok", None), getattr(prices, "output_mtok", None)
    if not isinstance(given, Decimal) or not isinstance(made, Decimal):
        return None
    return given, made


@functools.lru_cache(maxsize=256)
def _resolve(model: str, base_url: str | None) -> tuple[Any, Any] | None:
    """The price list's (provider, model) for a model at an endpoint, found once per pair (the
    search matches the name against every model's patterns: most of a call's pricing time)."""
    snapshot = _genai_prices().data_snapshot.get_snapshot()
    provider = _url_provider(base_url) if base_url else None
    head, _, bare = model.partition("/")
    attempts: list[tuple[str, str | None]] = []
    if provider is not None:  # the endpoint is a known provider's: its prices, by either name
        attempts.append((model, provider))
        if bare:
            attempts.append((bare, provider))
    else:
        if bare and _known_provider(head):  # a handle: openai/gpt-4o-mini
            attempts.append((bare, head))
        attempts.append((model, None))  # genai-prices matches the name to a provider
        if bare:
            attempts.append((bare, None))
        attempts.append((model, "openai"))  # its embedding models, unmatched
    for ref, provider_id in attempts:
        try:
            return tuple(snapshot.find_provider_model(ref, None, provider_id, None))
        except LookupError:
            continue
    return None


@functools.lru_cache(maxsize=64)
def _url_provider(base_url: str) -> str | None:
    """The id of the provider whose API ``base_url`` is (genai-prices' URL patterns), or None."""
    try:
        snapshot = _genai_prices().data_snapshot.get_snapshot()
        return str(snapshot.find_provider(None, None, base_url).id)
    except LookupError:
        return None


@functools.lru_cache(maxsize=64)
def _known_provider(name: str) -> bool:
    """Whether genai-prices knows a provider called ``name`` (``openai``, ``anthropic``...)."""
    gp = _genai_prices()
    snapshot = gp.data_snapshot.get_snapshot()
    return gp.data_snapshot.find_provider_by_id(snapshot.providers, name) is not None


def _genai_prices() -> ModuleType:
    """The genai_prices module with its price data loaded (the import lock makes a caller wait for
    a :func:`warm` already under way rather than import twice)."""
    import genai_prices
    from genai_prices import data_snapshot

    data_snapshot.get_snapshot()
    return genai_prices


def warm() -> None:
    """Import genai-prices and load its price data on a background thread, once per process (a
    failing import is the first priced call's to report). Called in a running event loop (a
    run's clients preparing), the thread starts once the loop is quiet, its first requests out
    (ci_evals._util.quiet), or when :func:`warmed` asks first. Not while the suite author's
    Python is loaded: it may close descriptors a thread of ours is reading (ci_evals.usercode.
    contain.refill_stdio); the first priced call loads it then."""
    global _warm_thread, _warm_task
    with _warm_lock:
        if _warm_thread is not None or loaded_paths():
            return
        _warm_thread = threading.Thread(target=_warm_quietly, name="ci-evals-prices", daemon=True)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        _start_warming()
        return
    _warm_task = loop.create_task(when_quiet(_start_warming))  # kept: a task is weakly held


def _start_warming() -> None:
    """Start :func:`warm`'s thread, unless it was already (by its quiet task or :func:`warmed`)."""
    with _warm_lock:
        thread = _warm_thread
        if thread is not None and thread.ident is None:
            thread.start()


_memo: Memo | None = None
_memo_lock = threading.Lock()


def _the_memo() -> Memo:
    """This process's memo of the list's answers (:mod:`ci_evals.llm.price_memo`)."""
    global _memo
    if _memo is not None:  # every priced call asks: no lock once it is made
        return _memo
    with _memo_lock:
        if _memo is None:
            _memo = Memo.default()
        return _memo


def warmed() -> None:
    """Wait for :func:`warm`'s thread, starting it if it still waits for a quiet loop (work queued
    behind the price list, on another background thread, started at the same quiet moment)."""
    thread = _warm_thread
    if thread is not None:
        _start_warming()
        thread.join()


def _warm_quietly() -> None:
    try:
        if _the_memo().load():  # today's memo: the list is imported only if a call misses it
            return
        _genai_prices()
    except Exception:  # noqa: S110 - the first priced call imports it again and raises
        pass


def price_list_version() -> str:
    """The price list ``price`` falls back to, as summaries name it: ``genai-prices 0.2.3``."""
    try:
        return f"{PACKAGE} {metadata.version(PACKAGE)}"
    except metadata.PackageNotFoundError:
        return f"{PACKAGE} (not installed)"
