"""One set of shared clients and endpoint schedulers per event loop, and the run's settings for them.

Every grader and target of a run shares, per (provider, base URL, key), one SDK client (pooled
connections) and one :class:`~ci_evals.llm.scheduler.Endpoint` (the adaptive limit, the pace and
the breaker). They live with the event loop that uses them: an SDK client or a future bound to
one loop must never be used from another (tests and nested runs start their own loops).
:func:`borrow` lends a grader or target its endpoint's client and scheduler, :func:`give_back`
returns the client (its last user closes it); :func:`once` makes identical cached calls in flight
share one request.
:func:`configure` sets the run's concurrency cap, known limits and throttling budget before any
endpoint is used; :func:`endpoint_reports` and :func:`throttling_note` give what the summary and
the progress line show.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit, urlunsplit

from ci_evals._util.errors import ConfigError
from ci_evals.config.rates import DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_WAIT, check_rates
from ci_evals.llm.cost import LLMResult
from ci_evals.llm.errors import LLMError
from ci_evals.llm.limits import Limits
from ci_evals.llm.scheduler import Endpoint

if TYPE_CHECKING:  # the summary.json type only: importing ci_evals.llm loads no pydantic
    from ci_evals.results.records import EndpointReport


@dataclass
class EngineConfig:
    """What the run tells every endpoint: its concurrency cap, known limits, throttling budget.

    ``rates`` maps a provider name (``openai``, ``anthropic``, ``google``), a base URL, or ``*``
    to ``(rpm, tpm)``; the most specific match wins (base URL, then provider, then ``*``).
    """

    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    rates: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    max_wait: float = DEFAULT_MAX_WAIT

    def limits(self, provider: str, base_url: str) -> Limits:
        rpm = tpm = None
        for key in ("*", provider, base_url.rstrip("/")):
            r, t = self.rates.get(key, (None, None))
            rpm, tpm = r if r is not None else rpm, t if t is not None else tpm
        return Limits(max_concurrent=self.max_concurrent, rpm=rpm, tpm=tpm, max_wait=self.max_wait)


def endpoint_identity(url: str | None) -> str | None:
    """A base URL as one server's identity: scheme and host in lower case, no default port, the path
    without a trailing slash (``http://H:80/v1/`` and ``http://h/v1`` are one endpoint: one client, one
    scheduler, one AIMD limit). None (the provider's default endpoint) stays None."""
    if url is None:
        return None
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, default) else f"{host}:{port}"
    if parts.username is not None:  # credentials in the URL are part of who calls: kept apart
        netloc = f"{parts.username}:{parts.password or ''}@{netloc}"
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), parts.query, ""))


ClientKey = tuple[str, str | None, str]
"""(provider, :func:`endpoint_identity` of the base URL, API key): one server as one caller sees it."""


@dataclass(eq=False, slots=True)
class Shared:
    """One endpoint's SDK client and how many graders and targets use it (the last one closes it)."""

    client: Any
    users: int = 0


class LoopState:
    """One event loop's shared SDK clients (with their users' count), in-flight cached calls and endpoints."""

    def __init__(self) -> None:
        self.clients: dict[ClientKey, Shared] = {}
        self.inflight: dict[tuple[str, str], asyncio.Future[dict[str, Any]]] = {}
        self.endpoints: dict[ClientKey, Endpoint] = {}
        self.config = EngineConfig()


_STATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopState] = (
    weakref.WeakKeyDictionary()
)


def loop_state() -> LoopState:
    loop = asyncio.get_running_loop()
    state = _STATES.get(loop)
    if state is None:
        state = _STATES[loop] = LoopState()
    return state


def borrow(
    key: ClientKey, make: Callable[[], Any], name: str, base_url: str
) -> tuple[LoopState, Any, Endpoint]:
    """(this event loop's state, the client of ``key``'s endpoint, its scheduler) for one more user.
    The client is built by ``make`` for its first user; the scheduler is named ``name`` in messages
    and the summary, and paced by the limits the run set for the provider or ``base_url``."""
    state = loop_state()
    shared = state.clients.get(key)
    if shared is None:
        shared = state.clients[key] = Shared(make())
    shared.users += 1
    endpoint = state.endpoints.get(key)
    if endpoint is None:
        provider = key[0]
        endpoint = state.endpoints[key] = Endpoint(
            name, state.config.limits(provider, base_url), provider
        )
    return state, shared.client, endpoint


def give_back(state: LoopState, key: ClientKey) -> Any:
    """One user fewer of ``key``'s client: the client when that was its last user (the caller
    closes it), else None."""
    shared = state.clients.get(key)
    if shared is None:
        return None
    shared.users -= 1
    if shared.users > 0:
        return None
    del state.clients[key]
    return shared.client


async def once(
    state: LoopState, flight: tuple[str, str], lead: Callable[[], Awaitable[LLMResult]]
) -> LLMResult:
    """Identical cached calls in flight (``flight``: the cache and the key) share one request: the
    first runs ``lead``; the others wait for its answer and count as cache hits, or get its
    failure (its retries counted once, there)."""
    pending = state.inflight.get(flight)
    if pending is not None:
        try:
            return LLMResult(await asyncio.shield(pending), cache_hit=True)
        except LLMError as exc:  # the leader's failure
            raise LLMError(exc.message, status=exc.status, category=exc.category) from None
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    state.inflight[flight] = future
    try:
        result = await lead()
        future.set_result(result.data)
        return result
    except Exception as exc:
        future.set_exception(exc)
        future.exception()  # retrieved: no "never retrieved" warning when nobody waited
        raise
    except BaseException:
        future.cancel()
        raise
    finally:
        state.inflight.pop(flight, None)


def configure(
    max_concurrent: int | None = None,
    rates: dict[str, tuple[float | None, float | None]] | None = None,
    max_wait: float | None = None,
    *,
    check_only: bool = False,
) -> None:
    """Set this event loop's engine (the runner calls it before any endpoint is used). A rate too
    slow for ``max_wait`` is a ConfigError; ``check_only``: only that check (no loop needed)."""
    problem = check_rates(dict(rates or {}), max_wait or DEFAULT_MAX_WAIT, "--rpm or rate_limits")
    if problem is not None:
        raise ConfigError(problem)
    if check_only:
        return
    state = loop_state()
    state.config = EngineConfig(
        max_concurrent=max_concurrent or EngineConfig.max_concurrent,
        rates=dict(rates or {}),
        max_wait=max_wait or DEFAULT_MAX_WAIT,
    )
    state.endpoints.clear()


def endpoint_reports() -> list[EndpointReport]:
    """Every endpoint this event loop called: calls, throttling, the limit it settled on, breaker
    (none outside a running loop: a split run's progress line while it waits for its workers)."""
    try:
        state = _STATES.get(asyncio.get_running_loop())
    except RuntimeError:
        return []
    if state is None:
        return []
    return [ep.report() for ep in state.endpoints.values() if ep.calls or ep.stopped]


def throttling_note(reports: list[EndpointReport]) -> str | None:
    """One short line on throttling for the progress line (None when nothing was throttled)."""
    rejected = sum(r["rejected"] for r in reports)
    if not rejected:
        return None
    waited = sum(r["waited_s"] for r in reports)
    now = min(r["concurrency"] for r in reports if r["rejected"])
    return f"throttled: {rejected} rejected, {waited:.0f} s waited, {now} in flight"


def combined_endpoints(
    parts: list[list[EndpointReport]], *, side_by_side: bool = True
) -> list[EndpointReport] | None:
    """Several runs' ``endpoints`` as one entry per endpoint (and provider), in the order first
    met: a ``merge``'s shards (``side_by_side``) or a run and its ``--resume`` (one after the other).
    Calls and rejected calls are summed; ``waited_s`` is the longest any shard was held back, as
    ``duration_s`` is the longest shard's (side by side), or the parts' sum (one after the other);
    ``concurrency`` and ``lowest_concurrency`` the lowest of any part and ``max_concurrent`` the
    highest (each one machine's figure); any other key (a limit and where it came from, a
    breaker's ``stopped``) the first part's that has it (a part that stopped calling errors the
    verdict, which names why)."""
    merged: dict[tuple[str | None, str | None], dict[str, Any]] = {}
    adds = ("calls", "rejected") if side_by_side else ("calls", "rejected", "waited_s")
    for part in parts:
        for ep in part:
            into = merged.setdefault((ep.get("endpoint"), ep.get("provider")), {})
            for name, value in ep.items():
                if name not in into:
                    into[name] = value
                elif name in adds:
                    into[name] += value
                elif name in ("waited_s", "max_concurrent"):
                    into[name] = max(into[name], value)
                elif name in ("concurrency", "lowest_concurrency"):
                    into[name] = min(into[name], value)
    for entry in merged.values():
        if isinstance(entry.get("waited_s"), float):
            entry["waited_s"] = round(entry["waited_s"], 3)  # as each part gives it
    return [cast("EndpointReport", entry) for entry in merged.values()] or None
