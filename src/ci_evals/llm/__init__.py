"""The one OpenAI-compatible client wrapper: shared connections, retries, timeouts, cache, usage.

Every LLM judge, the model target and embedding metrics call models through :class:`LLM`, so
OpenAI, Azure-compatible gateways, vLLM, Ollama and LiteLLM all behave the same way:

* Endpoint: ``base_url`` / ``api_key_env`` from the spec, else ``OPENAI_BASE_URL`` /
  ``OPENAI_API_KEY``. A custom base URL needs no key (local servers); the real OpenAI API does.
* ``provider: anthropic | google``: the same wrapper over the vendor's SDK (see
  :mod:`ci_evals.providers`); only the endpoint, the request shape and the error mapping differ.
* One ``AsyncOpenAI`` client per (event loop, base URL, key), shared by every grader and target,
  so concurrent calls reuse pooled connections.
* Our own retry loop (the SDK's is off): 429, 408, 409, 5xx, timeouts, dropped connections and
  malformed bodies (not JSON, or no ``choices[0].message`` / embeddings) are retried with exponential backoff and full jitter, or after ``Retry-After``
  when the server sends one, at most ``max_retries`` times.
* A content-addressed response cache on disk (see :class:`ResponseCache`); identical concurrent
  calls share one request. Only usable responses are cached; an entry that is not (``{}``,
  ``{"choices": []}``) is a miss and gets overwritten.
* ``timeout`` bounds each attempt as a whole (a server dripping bytes is cut off), not each read.
* Token usage per call; :class:`Tally` sums calls into the grade/trajectory metadata keys the
  runner aggregates: ``usage``, ``cache_hits``, ``retries`` (and ``cost_usd`` with pricing).

Error messages never contain the API key.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import random
import sys
import threading
import urllib.parse
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci_evals._util.errors import CiEvalsError, ConfigError
from ci_evals._util.netcause import SYSTEMATIC
from ci_evals._util.redact import MESSAGE_LIMIT, register, scrub_and_shorten, scrub_tree
from ci_evals._util.retry import Backoff
from ci_evals._util.retry import retry_after as _asked_wait
from ci_evals.llm.scheduler import (
    DEFAULT_MAX_WAIT,
    THROTTLE_STATUS,
    Endpoint,
    EndpointStopped,
    Limits,
    ThrottledOut,
    Ticket,
)
from ci_evals.providers import Failure, status_failure, transport_failure

DEFAULT_BASE_URL = "https://api.openai.com/v1"
NO_KEY = "sk-no-key-required"
BACKOFF_BASE = 0.5
"""Seconds: the first retry waits up to this long, doubling each time (full jitter)."""
BACKOFF_CAP = 20.0
MAX_RETRY_AFTER = 60.0
"""A server's ``Retry-After`` is honoured up to this many seconds."""
CACHE_VERSION = "ci-evals-llm-cache/1"
_RETRY_STATUS = frozenset({408, 409, 429})


class LLMError(CiEvalsError):
    """An LLM call failed for good (non-retryable, or out of retries). Never contains the key."""

    def __init__(self, message: str, *, status: int | None = None, retries: int = 0, throttled: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retries = retries
        self.throttled = throttled


# --- small pure helpers -------------------------------------------------------------------------


def is_reasoning_model(model: str) -> bool:
    """o1/o3/o4 and gpt-5 models (a ``provider/`` prefix is ignored) accept only temperature 1."""
    name = model.lower().rsplit("/", 1)[-1]
    return name.startswith(("o1", "o3", "o4")) or "gpt-5" in name


def effective_temperature(model: str, temperature: float | None) -> float | None:
    """The temperature to send: 1.0 for reasoning models, else as given."""
    if temperature is not None and is_reasoning_model(model):
        return 1.0
    return temperature


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


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds a response asks us to wait (every form :func:`ci_evals._util.retry.retry_after`
    reads), at most ``MAX_RETRY_AFTER``."""
    asked = _asked_wait(headers)
    return None if asked is None else min(asked, MAX_RETRY_AFTER)


def cache_key(endpoint: str, body: dict[str, Any], repeat: int = 0) -> str:
    """sha256 of the canonical JSON of (endpoint, full request body, repeat index)."""
    canon = json.dumps(
        {"v": CACHE_VERSION, "endpoint": endpoint, "request": body, "repeat": repeat},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def shown_url(url: str) -> str:
    """The URL without any user:password part, for messages."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def resolve_endpoint(base_url: str | None, api_key_env: str | None, *, owner: str | None = None) -> tuple[str | None, str]:
    """(base URL or None for OpenAI, API key) from the spec, then the OPENAI_* environment.

    A custom base URL without a key gets a placeholder key (local servers ignore it); the real
    OpenAI API without a key, or a named ``api_key_env`` that is unset, is a ConfigError.
    """
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise ConfigError(f"environment variable {api_key_env} (api_key_env) is not set", key=owner)
        return url, key
    key = os.environ.get("OPENAI_API_KEY")
    if not key:
        if url is None:
            raise ConfigError(
                "OPENAI_API_KEY is not set; set it, or point base_url / OPENAI_BASE_URL at an "
                "OpenAI-compatible server",
                key=owner,
            )
        key = NO_KEY
    return url, key


# --- results and tallies ------------------------------------------------------------------------


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
        return [d["embedding"] for d in sorted(self.data.get("data") or [], key=lambda d: d.get("index", 0))]


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

    def add(self, result: LLMResult, model: str | None = None, pricing: dict[str, Any] | None = None) -> LLMResult:
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
        meta: dict[str, Any] = {"usage": self.usage, "cache_hits": self.cache_hits, "retries": self.retries}
        if self.throttled:
            meta["throttled"] = self.throttled
        if self.cost_usd is not None:
            meta["cost_usd"] = self.cost_usd
        return meta


# --- the disk cache -----------------------------------------------------------------------------


class ResponseCache:
    """Response JSON stored at ``root/<key[:2]>/<key>.json``.

    Writes go to a unique temporary file renamed into place (``os.replace``), so concurrent
    writers and readers (threads or processes) never see a partial entry. A corrupt or
    unreadable entry is a miss; a failed write is ignored (the call already succeeded).
    From async code, :meth:`put_later` writes in a worker thread (the heavier half of the I/O)
    while the entry is served from memory; :meth:`flush` waits for pending writes.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._made: set[Path] = set()
        self._pending: dict[str, dict[str, Any]] = {}
        self._tasks: set[asyncio.Task] = set()

    def put_later(self, key: str, data: dict[str, Any]) -> None:
        """Write ``data`` in a worker thread; this process sees it at once."""
        self._pending[key] = data
        task = asyncio.get_running_loop().create_task(self._write(key, data))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, key: str, data: dict[str, Any]) -> None:
        try:
            await asyncio.to_thread(self.put, key, data)
        finally:
            self._pending.pop(key, None)

    async def flush(self) -> None:
        """Wait until every write started by :meth:`put_later` is on disk."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry, or None. A small synchronous read (a miss is one failed open)."""
        pending = self._pending.get(key)
        if pending is not None:
            return pending
        try:
            with open(self.path(key), "rb") as fh:
                data = json.loads(fh.read())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def put(self, key: str, data: dict[str, Any]) -> None:
        data = scrub_tree(data)  # a server that echoes the key must not leave it on disk
        target = self.path(key)
        tmp = target.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.{random.getrandbits(32):08x}.tmp")
        try:
            if target.parent not in self._made:
                target.parent.mkdir(parents=True, exist_ok=True)
                self._made.add(target.parent)
            with open(tmp, "wb") as fh:
                fh.write(json.dumps(data, ensure_ascii=False).encode("utf-8"))
            os.replace(tmp, target)
        except OSError:
            try:
                tmp.unlink()
            except OSError:
                pass


# --- shared clients and schedulers, one set per event loop ------------------------------------


@dataclass
class EngineConfig:
    """What the run tells every endpoint: its concurrency cap, known limits, throttling budget.

    ``rates`` maps a provider name (``openai``, ``anthropic``, ``google``), a base URL, or ``*``
    to ``(rpm, tpm)``; the most specific match wins (base URL, then provider, then ``*``).
    """

    max_concurrent: int = 1000
    rates: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    max_wait: float = DEFAULT_MAX_WAIT

    def limits(self, provider: str, base_url: str) -> Limits:
        rpm = tpm = None
        for key in ("*", provider, base_url.rstrip("/")):
            r, t = self.rates.get(key, (None, None))
            rpm, tpm = r if r is not None else rpm, t if t is not None else tpm
        return Limits(max_concurrent=self.max_concurrent, rpm=rpm, tpm=tpm, max_wait=self.max_wait)


class _LoopState:
    def __init__(self) -> None:
        self.clients: dict[tuple[str | None, str], list[Any]] = {}  # -> [client, refcount]
        self.inflight: dict[tuple[str, str], asyncio.Future] = {}
        self.endpoints: dict[tuple[str, str | None, str], Endpoint] = {}
        self.config = EngineConfig()


_STATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()


def _state() -> _LoopState:
    loop = asyncio.get_running_loop()
    state = _STATES.get(loop)
    if state is None:
        state = _STATES[loop] = _LoopState()
    return state


def configure(max_concurrent: int | None = None, rates: dict[str, tuple[float | None, float | None]] | None = None,
              max_wait: float | None = None) -> None:
    """Set this event loop's engine (the runner calls it before any endpoint is used)."""
    state = _state()
    state.config = EngineConfig(max_concurrent=max_concurrent or EngineConfig.max_concurrent,
                                rates=dict(rates or {}), max_wait=max_wait or DEFAULT_MAX_WAIT)
    state.endpoints.clear()


def endpoint_reports() -> list[dict[str, Any]]:
    """Every endpoint this event loop called: calls, throttling, the limit it settled on, breaker."""
    state = _STATES.get(asyncio.get_running_loop())
    if state is None:
        return []
    return [ep.report() for ep in state.endpoints.values() if ep.calls or ep.stopped]


def throttling_note(reports: list[dict[str, Any]]) -> str | None:
    """One short line on throttling for the progress line (None when nothing was throttled)."""
    rejected = sum(r["rejected"] for r in reports)
    if not rejected:
        return None
    waited = sum(r["waited_s"] for r in reports)
    now = min(r["concurrency"] for r in reports if r["rejected"])
    return f"throttled: {rejected} rejected, {waited:.0f} s waited, {now} in flight"


def _make_client(url: str | None, key: str, timeout: float) -> Any:
    """An AsyncOpenAI client with the SDK's retries off (we retry, counting and honouring Retry-After).

    The SDK's aiohttp transport (``openai[aiohttp]``) is used when installed: httpx's connection
    pool costs about 1 ms of CPU per call at 50+ connections, which dominated wall time at high
    concurrency; aiohttp's does not.
    """
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient

    http_client = None
    # aiohttp refuses a URL with user:password alongside the SDK's Authorization header; httpx sends it.
    has_userinfo = bool(url) and "@" in urllib.parse.urlsplit(url).netloc
    if USE_AIOHTTP and not has_userinfo:
        try:
            import aiohttp  # noqa: F401  (the extra that DefaultAioHttpClient needs)
            from openai import DefaultAioHttpClient
        except ImportError:
            pass
        else:
            http_client = DefaultAioHttpClient(timeout=timeout)
    if http_client is None:
        http_client = DefaultAsyncHttpxClient(timeout=timeout)
    client = AsyncOpenAI(api_key=key, base_url=url, max_retries=0, timeout=timeout, http_client=http_client)
    _DIRECT[client] = _Direct(http_client, str(client.base_url).rstrip("/"),
                              {k: v for k, v in {**client.default_headers, **client.auth_headers}.items()
                               if isinstance(v, str)})
    return client


@dataclass(slots=True)
class _Direct:
    """The SDK's own HTTP client for one endpoint, with the headers the SDK sends (its public
    ``default_headers`` and ``auth_headers``): a POST through it skips the SDK's per-call request
    building, which was most of the CPU per call at high concurrency (issue 21, measured)."""

    http: Any
    base: str
    headers: dict[str, str]


_DIRECT: weakref.WeakKeyDictionary[Any, _Direct] = weakref.WeakKeyDictionary()


USE_AIOHTTP = True  # tests switch it off to exercise httpx's own transport too
DIRECT = True  # POST through the SDK's own HTTP client (tests switch it off to cover the SDK's post)


def _estimate_tokens(body: dict[str, Any]) -> float:
    """Tokens a request may cost against a token limit: ~4 characters a token, plus max_tokens."""
    text = json.dumps(body.get("messages") or body.get("input") or body.get("contents") or "", ensure_ascii=False)
    out = body.get("max_tokens") or body.get("max_completion_tokens") or 0
    return len(text) / 4 + (out if isinstance(out, int | float) else 0)


class LLM:
    """An OpenAI-compatible endpoint as seen by one grader or target.

    Constructing it reads nothing and connects nowhere (safe in ``validate``); :meth:`start`
    resolves the endpoint (ConfigError when no key can be found) and borrows the shared client
    and the endpoint's scheduler (:mod:`ci_evals.llm.scheduler`).

    Args:
        base_url: the endpoint (``.../v1``); default ``OPENAI_BASE_URL`` or OpenAI.
        api_key_env: name of the environment variable holding the key; default OPENAI_API_KEY.
        timeout: seconds per HTTP attempt.
        max_retries: retries after the first attempt for transient failures (throttling answers
            are waits, not retries: they never use this budget).
        cache_dir: response cache folder, or None for no cache.
        owner: YAML path used in error messages (``graders.quality``).
        provider: ``openai`` (any OpenAI-compatible server), ``anthropic`` or ``google``.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 5,
        cache_dir: str | Path | None = None,
        owner: str | None = None,
        provider: str = "openai",
    ) -> None:
        if base_url is not None:
            from ci_evals._util.bounds import check_url

            check_url(base_url, f"{owner}.base_url" if owner else "base_url")
        self.provider = provider
        self._vendor: Any = None
        self.spec_base_url = base_url
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.max_retries = max_retries
        self.cache = ResponseCache(cache_dir) if cache_dir is not None else None
        self.owner = owner
        self.base_url = DEFAULT_BASE_URL
        self._key: str | None = None
        self._client: Any = None
        self._pool_key: tuple[str | None, str] | None = None
        self._state: _LoopState | None = None
        self.endpoint: Endpoint | None = None

    async def start(self) -> None:
        """Resolve the endpoint and borrow the shared client and scheduler for this event loop."""
        if self._client is not None:
            return
        if self.provider != "openai":
            from ci_evals.providers import require, vendor

            require(self.provider, self.owner)
            self._vendor = vendor(self.provider)
            url, key = self._vendor.endpoint(self.spec_base_url, self.api_key_env, self.owner)
            default = self._vendor.default_base_url
        else:
            url, key = resolve_endpoint(self.spec_base_url, self.api_key_env, owner=self.owner)
            default = DEFAULT_BASE_URL
        self.base_url = (url or default).rstrip("/")
        self._key = key
        register(key if key != NO_KEY else None)
        state = _state()
        self._pool_key = (self.provider, url, key)
        entry = state.clients.get(self._pool_key)
        if entry is None:
            client = (self._vendor.client(url, key, self.timeout) if self._vendor is not None
                      else _make_client(url, key, self.timeout))
            entry = state.clients[self._pool_key] = [client, 0]
        entry[1] += 1
        self._client = entry[0]
        self._state = state
        self.endpoint = state.endpoints.get(self._pool_key)
        if self.endpoint is None:
            self.endpoint = state.endpoints[self._pool_key] = Endpoint(
                shown_url(self.base_url), state.config.limits(self.provider, self.base_url), self.provider)

    async def aclose(self) -> None:
        """Finish cache writes and return the shared client; the last user closes it."""
        if self.cache is not None:
            await self.cache.flush()
        if self._client is None:
            return
        entry = self._state.clients.get(self._pool_key)
        self._client = None
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self._state.clients[self._pool_key]
                await (self._vendor.close(entry[0]) if self._vendor is not None else entry[0].close())

    async def chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        repeat: int = 0,
    ) -> LLMResult:
        """One ``/chat/completions`` call; ``params`` with None values are not sent.

        ``repeat`` only enters the cache key, so repeated runs of one request stay independent.
        """
        if self.provider != "openai":
            if self._vendor is None:
                await self.start()
            path, body = self._vendor.request(model, messages, params or {}, response_format)
            return await self._call(path, body, repeat)
        body: dict[str, Any] = {"model": model, "messages": messages}
        if params:
            body.update({k: v for k, v in params.items() if v is not None})
        if tools:
            body["tools"] = tools
        if response_format:
            body["response_format"] = response_format
        return await self._call("/chat/completions", body, repeat)

    async def embed(self, model: str, inputs: list[str], *, repeat: int = 0) -> LLMResult:
        """One ``/embeddings`` call; vectors are in ``result.embeddings``."""
        return await self._call("/embeddings", {"model": model, "input": list(inputs)}, repeat)

    async def _call(self, path: str, body: dict[str, Any], repeat: int) -> LLMResult:
        if self._client is None:
            await self.start()
        if self.cache is None:
            return await self._http(path, body)
        key = cache_key(self.base_url + path, body, repeat)
        data = self.cache.get(key)
        if data is not None and unusable(path, data) is None:  # an unusable entry is a miss, overwritten
            return LLMResult(data, cache_hit=True)
        # Identical calls in flight share one request (the followers count as cache hits).
        flight = (str(self.cache.root), key)
        pending = self._state.inflight.get(flight)
        if pending is not None:
            try:
                return LLMResult(await asyncio.shield(pending), cache_hit=True)
            except LLMError as exc:  # the leader's failure; its retries are counted once, there
                raise LLMError(exc.message, status=exc.status) from None
        future = asyncio.get_running_loop().create_future()
        self._state.inflight[flight] = future
        try:
            result = await self._http(path, body)
            self.cache.put_later(key, result.data)
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
            self._state.inflight.pop(flight, None)

    async def _http(self, path: str, body: dict[str, Any]) -> LLMResult:
        """Attempts through the endpoint's scheduler until one succeeds or a failure is final.

        Throttling answers (429, 503, 529) are waits the scheduler manages and never use the
        retry budget; other transient failures are retried with backoff (``max_retries``).
        """
        ep = self.endpoint
        backoff = Backoff(base=BACKOFF_BASE, cap=BACKOFF_CAP, max_retries=self.max_retries,
                          max_retry_after=MAX_RETRY_AFTER)
        tokens = _estimate_tokens(body) if ep.tok_bucket is not None else 0.0
        first_throttle: float | None = None
        front = False
        throttled = 0
        while True:
            try:
                ticket = await ep.acquire(tokens, front=front)
            except EndpointStopped as stop:
                raise self._error(path, f"not sent: {stop.cause}", None, backoff.retries) from None
            ticket.first_throttle = first_throttle
            try:
                data, headers = await self._attempt(path, body)
            except Failure as failure:
                throttled += failure.status in THROTTLE_STATUS and failure.kind != "quota"
                wait = self._after_failure(ep, ticket, failure, backoff, path, throttled)
                first_throttle, front = ticket.first_throttle, True
                if wait:
                    await asyncio.sleep(wait)
                continue
            except BaseException:
                ep.abandon()
                raise
            usage = _usage(data)
            ep.success(ticket, headers, usage["prompt_tokens"] + usage["completion_tokens"])
            return LLMResult(data, retries=backoff.retries, usage=usage, throttled=throttled)

    async def _attempt(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """One attempt, bounded as a whole by ``timeout``: (usable response JSON, headers) or Failure."""
        try:
            async with asyncio.timeout(self.timeout):  # the whole attempt, not each read
                if self._vendor is not None:
                    data, headers = await self._vendor.send(self._client, body, self.timeout)
                else:
                    data, headers = await self._openai_attempt(path, body)
        except TimeoutError:
            raise Failure(f"timed out after {self.timeout:g} s") from None
        problem = unusable(path, data)
        if problem is not None:
            raise Failure(problem)
        return data, headers

    def _after_failure(self, ep: Endpoint, ticket: Ticket, failure: Failure, backoff: Backoff, path: str,
                       throttled: int = 0) -> float:
        """Account for a failed attempt: the seconds to wait before the next one, or raise LLMError."""
        if failure.status in THROTTLE_STATUS and failure.kind != "quota":
            asked = failure.wait if failure.wait is not None else _asked_wait(failure.headers)
            try:
                ep.throttled(ticket, asked, failure.headers)
            except ThrottledOut as out:
                raise self._error(path, f"{failure.problem}; {out}", failure.status,
                                  backoff.retries, throttled) from None
            return 0.0  # the scheduler holds the next attempt until the endpoint resumes
        systematic = failure.kind in SYSTEMATIC or (failure.kind or "").startswith("http_") or failure.kind == "quota"
        wait = None
        first_contact = ep.successes == 0 and failure.kind in SYSTEMATIC
        if failure.retry and not first_contact:
            asked = failure.wait if failure.wait is not None else _asked_wait(failure.headers)
            wait = backoff.next_wait(asked)
        if wait is not None:
            ep.abandon()
            return wait
        error = self._error(path, failure.problem, failure.status, backoff.retries, throttled)
        was_open = ep.stopped
        ep.failed(ticket, failure.kind if systematic else None, self._stop_line(failure))
        if ep.stopped and not was_open:
            print(scrub_and_shorten(f"error: {ep.stopped}", MESSAGE_LIMIT, [self._key]), file=sys.stderr)
        raise error

    def _stop_line(self, failure: Failure) -> str:
        """The breaker's one line: the cause, the host (never the key) and what to check."""
        key_var = self.api_key_env or {"anthropic": "ANTHROPIC_API_KEY", "google": "GEMINI_API_KEY"}.get(
            self.provider, "OPENAI_API_KEY")
        url_var = {"anthropic": "ANTHROPIC_BASE_URL", "google": "GOOGLE_GEMINI_BASE_URL"}.get(
            self.provider, "OPENAI_BASE_URL")
        hint = {
            "dns": f"check the host name in base_url (or {url_var})",
            "refused": f"is the server running? check the host and port in base_url (or {url_var})",
            "tls": "check the scheme (http/https) and the server's certificate (SSL_CERT_FILE)",
            "http_401": f"check the API key in {key_var}",
            "http_403": f"check that the key in {key_var} may use this model and endpoint",
            "http_404": "check the model name and that base_url ends where the API starts (…/v1)",
            "http_400": "the server rejects every request: check the model and its parameters",
            "quota": "the account's quota is used up: check its plan and billing",
        }.get(failure.kind or "", "check the endpoint")
        problem = scrub_and_shorten(failure.problem, MESSAGE_LIMIT, [self._key])  # a server may echo the key
        return f"stopped calling {shown_url(self.base_url)} after its first calls all failed: {problem} ({hint})"

    async def _openai_attempt(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """One ``POST``: (the response JSON, its headers), or :class:`Failure`.

        Through the SDK's own HTTP client with the SDK's headers when we built the client
        (:class:`_Direct`), else through the SDK's ``post``.
        """
        direct = _DIRECT.get(self._client) if DIRECT else None
        if direct is not None:
            return await self._direct_attempt(direct, path, body)
        import openai

        try:  # the client carries the timeout; no per-call options to merge
            response = await self._client.post(path, cast_to=_raw_response(), body=body)
            raw = await response.read()
        except openai.APIStatusError as exc:
            raise status_failure(exc.status_code, _error_text(exc), exc.response.headers,
                                  _error_code(exc)) from None
        except openai.APIError as exc:
            if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError) or exc.__cause__ is not None:
                raise transport_failure(exc, self.base_url, self.timeout) from None
            raise Failure(str(exc), retry=False) from None
        except (OSError, TimeoutError) as exc:  # a transport error the SDK did not wrap (a read)
            raise transport_failure(exc, self.base_url, self.timeout) from None
        data = _json_or_none(raw)
        if not isinstance(data, dict):
            raise Failure("the response body is not valid JSON")
        return data, response.headers

    async def _direct_attempt(self, direct: _Direct, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        try:
            request = direct.http.build_request("POST", direct.base + path, headers=direct.headers,
                                                content=json.dumps(body).encode("utf-8"))
            response = await direct.http.send(request, stream=True)
            try:
                raw = await _capped_body(response)
            finally:
                await response.aclose()
        except Exception as exc:  # the transport's errors (httpx or aiohttp), named by their cause
            if not (isinstance(exc, OSError | TimeoutError) or type(exc).__module__.split(".")[0] in (
                    "httpx", "httpx2", "httpcore", "httpcore2", "aiohttp", "openai")):
                raise
            raise transport_failure(exc, self.base_url, self.timeout) from None
        data = _json_or_none(raw)
        status = response.status_code
        if status >= 400:
            err = data.get("error") if isinstance(data, dict) else None
            if isinstance(err, dict):
                text, code = err.get("message"), err.get("code")
            else:
                text, code = (err if isinstance(err, str) else None), None
            text = text or (data.get("message") if isinstance(data, dict) else None) or "no details"
            raise status_failure(status, str(text), response.headers, str(code) if code else None)
        if not isinstance(data, dict):
            raise Failure("the response body is not valid JSON")
        return data, response.headers

    def _error(self, path: str, problem: str, status: int | None, retries: int, throttled: int = 0) -> LLMError:
        tail = f" (after {retries} retries)" if retries else ""
        msg = f"{shown_url(self.base_url)}{path}: {problem}{tail}"
        return LLMError(scrub_and_shorten(msg, MESSAGE_LIMIT, [self._key]), status=status, retries=retries, throttled=throttled)


MAX_RESPONSE_BYTES = 16 * 2**20
"""An LLM answer larger than this (16 MiB) is an error for the call, read no further: a server
sending a 300 MB body must not take the run's memory with it."""


async def _capped_body(response: Any) -> bytes:
    """The body, read up to ``MAX_RESPONSE_BYTES`` (a Failure past it; not retried)."""
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
        raise Failure(f"the response body is larger than {MAX_RESPONSE_BYTES // 2**20} MiB ({int(declared)} bytes "
                      "announced)", response.status_code, retry=False)
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise Failure(f"the response body is larger than {MAX_RESPONSE_BYTES // 2**20} MiB",
                          response.status_code, retry=False)
        chunks.append(chunk)
    return b"".join(chunks)


def _json_or_none(raw: bytes) -> Any:
    """The body's JSON value, or None when it is not JSON (the caller says what it needed)."""
    try:
        return json.loads(raw)
    except ValueError:
        return None


@functools.cache
def _raw_response() -> Any:
    """``openai.AsyncAPIResponse[object]``: the SDK's public raw response (body and headers), built once."""
    import openai

    return openai.AsyncAPIResponse[object]


def _error_code(exc: Any) -> str | None:
    body = getattr(exc, "body", None)
    code = body.get("code") if isinstance(body, dict) else None
    return str(code) if code else None


def unusable(path: str, data: dict[str, Any]) -> str | None:
    """Why a 200 response (or a cache entry) cannot be used, or None: what is never returned is never cached."""
    if path.endswith("/chat/completions"):
        choices = data.get("choices")
        if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)
                and isinstance(choices[0].get("message"), dict)):
            return "the response has no choices[0].message"
    elif path.endswith("/embeddings"):
        items = data.get("data")
        if not (isinstance(items, list) and items and all(
                isinstance(d, dict) and isinstance(d.get("embedding"), list) for d in items)):
            return "the response has no embeddings"
    return None


def _usage(data: dict[str, Any]) -> dict[str, int]:
    usage = data.get("usage") or {}
    return {
        "prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "completion_tokens": int(usage.get("completion_tokens") or 0),
    }


def _error_text(exc: Any) -> str:
    """The server's error message (from the JSON body when there is one), whole: the caller scrubs
    it, then cuts it."""
    body = getattr(exc, "body", None)
    text = body.get("message") if isinstance(body, dict) else None
    return str(text or getattr(exc, "message", "") or "no details")
