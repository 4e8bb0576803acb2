"""The one OpenAI-compatible client wrapper: shared connections, retries, timeouts, cache, usage.

Every LLM judge, the model target and embedding metrics call models through :class:`LLM`, so
OpenAI, Azure-compatible gateways, vLLM, Ollama and LiteLLM all behave the same way:

* Endpoint: ``base_url`` / ``api_key_env`` from the spec, else ``OPENAI_BASE_URL`` /
  ``OPENAI_API_KEY``. A custom base URL needs no key (local servers); the real OpenAI API does.
* ``provider: anthropic | google``: the same wrapper over the vendor's SDK (see
  :mod:`ci_evals.llm.providers`); only the endpoint, the request shape and the error mapping differ.
* One ``AsyncOpenAI`` client per (event loop, base URL, key), shared by every grader and target,
  so concurrent calls reuse pooled connections (:mod:`ci_evals.llm.pool`); one ``POST`` goes
  through :mod:`ci_evals.llm.transport`.
* Every attempt passes the endpoint's scheduler (:mod:`ci_evals.llm.scheduler`): the adaptive
  in-flight limit, pacing, one pause per 429, the breaker for systematic failures.
* Our own retry loop (the SDK's is off): 408, 409, 5xx, timeouts, dropped connections and
  malformed bodies (not JSON, or no ``choices[0].message`` / embeddings) are retried with
  exponential backoff and jitter, or after ``Retry-After`` when the server sends one, at most
  ``max_retries`` times. Throttling answers (429, 503, 529) are waits, never retries.
* A content-addressed response cache on disk (:mod:`ci_evals.llm.cache`); identical concurrent
  calls share one request. Only usable responses are cached; an entry that is not (``{}``,
  ``{"choices": []}``) is a miss and gets overwritten.
* ``timeout`` bounds each attempt as a whole (a server dripping bytes is cut off), not each read.
* Token usage per call; :class:`~ci_evals.llm.cost.Tally` sums calls into the grade/trajectory
  metadata keys the runner aggregates.

Error messages never contain the API key.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ci_evals._util.bounds import check_url
from ci_evals._util.errors import CiEvalsError, ConfigError
from ci_evals._util.netcause import SYSTEMATIC
from ci_evals._util.redact import MESSAGE_LIMIT, register, scrub_and_shorten
from ci_evals._util.retry import Backoff
from ci_evals._util.retry import retry_after as _asked_wait
from ci_evals.llm import transport
from ci_evals.llm.cache import ResponseCache, cache_key
from ci_evals.llm.cost import LLMResult, usage_of
from ci_evals.llm.hints import stop_hint
from ci_evals.llm.limits import estimate_tokens
from ci_evals.llm.pool import LoopState, endpoint_identity, loop_state
from ci_evals.llm.providers import Failure, require, vendor
from ci_evals.llm.scheduler import THROTTLE_STATUS, Endpoint, EndpointStopped, ThrottledOut, Ticket

DEFAULT_BASE_URL = transport.DEFAULT_BASE_URL
NO_KEY = "sk-no-key-required"
BACKOFF_BASE = 0.5
"""Seconds: the first retry waits up to this long, doubling each time (full jitter)."""
BACKOFF_CAP = 20.0
MAX_RETRY_AFTER = 60.0
"""A server's ``Retry-After`` is honoured up to this many seconds."""


class LLMError(CiEvalsError):
    """An LLM call failed for good (non-retryable, or out of retries). Never contains the key."""

    def __init__(
        self, message: str, *, status: int | None = None, retries: int = 0, throttled: int = 0
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retries = retries
        self.throttled = throttled


_JITTER = random.Random()
"""One generator for every call's backoff jitter (seeding one per call cost CPU at 200 in flight)."""


def is_reasoning_model(model: str) -> bool:
    """o1/o3/o4 and gpt-5 models (a ``provider/`` prefix is ignored) accept only temperature 1."""
    name = model.lower().rsplit("/", 1)[-1]
    return name.startswith(("o1", "o3", "o4")) or "gpt-5" in name


def effective_temperature(model: str, temperature: float | None) -> float | None:
    """The temperature to send: 1.0 for reasoning models, else as given."""
    if temperature is not None and is_reasoning_model(model):
        return 1.0
    return temperature


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds a response asks us to wait (every form :func:`ci_evals._util.retry.retry_after`
    reads), at most ``MAX_RETRY_AFTER``."""
    asked = _asked_wait(headers)
    return None if asked is None else min(asked, MAX_RETRY_AFTER)


def shown_url(url: str) -> str:
    """The URL without any user:password part, for messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def resolve_endpoint(
    base_url: str | None, api_key_env: str | None, *, owner: str | None = None
) -> tuple[str | None, str]:
    """(base URL or None for OpenAI, API key) from the spec, then the OPENAI_* environment.

    A custom base URL without a key gets a placeholder key (local servers ignore it); the real
    OpenAI API without a key, or a named ``api_key_env`` that is unset, is a ConfigError.
    """
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise ConfigError(
                f"environment variable {api_key_env} (api_key_env) is not set", key=owner
            )
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
        self._state: LoopState | None = None
        self.endpoint: Endpoint | None = None

    def prepare(self) -> None:
        """Import aiohttp or the vendor's SDK ahead of :meth:`start`; a failing import is start's to report."""
        with contextlib.suppress(Exception):
            transport.preload(self.provider)

    async def start(self) -> None:
        """Resolve the endpoint and borrow the shared client and scheduler for this event loop."""
        if self._client is not None:
            return
        if self.provider != "openai":
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
        state = loop_state()
        self._pool_key = (
            self.provider,
            endpoint_identity(url),
            key,
        )  # one server, one client and scheduler
        entry = state.clients.get(self._pool_key)
        if entry is None:
            client = (
                self._vendor.client(url, key, self.timeout)
                if self._vendor is not None
                else transport.make_client(url, key, self.timeout)
            )
            entry = state.clients[self._pool_key] = [client, 0]
        entry[1] += 1
        self._client = entry[0]
        self._state = state
        self.endpoint = state.endpoints.get(self._pool_key)
        if self.endpoint is None:
            self.endpoint = state.endpoints[self._pool_key] = Endpoint(
                shown_url(self.base_url),
                state.config.limits(self.provider, self.base_url),
                self.provider,
            )

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
                await (
                    self._vendor.close(entry[0])
                    if self._vendor is not None
                    else transport.close_client(entry[0])
                )

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
        if (
            data is not None and transport.unusable(path, data) is None
        ):  # an unusable entry is a miss, overwritten
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
        max_wait = ep.limits.max_wait  # no wait of ours passes it, a backoff's included
        backoff = Backoff(
            base=BACKOFF_BASE,
            cap=min(BACKOFF_CAP, max_wait),
            max_retries=self.max_retries,
            max_retry_after=min(MAX_RETRY_AFTER, max_wait),
            rng=_JITTER,
        )
        tokens = estimate_tokens(body) if ep.tok_bucket is not None else 0.0
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
                try:
                    data, headers = await self._attempt(path, body)
                except Failure as failure:
                    throttled += failure.status in THROTTLE_STATUS and failure.kind != "quota"
                    wait = self._after_failure(ep, ticket, failure, backoff, path, throttled)
                    first_throttle, front = ticket.first_throttle, True
                else:
                    usage = usage_of(data)
                    ep.success(ticket, headers, usage["prompt_tokens"] + usage["completion_tokens"])
                    return LLMResult(
                        data, retries=backoff.retries, usage=usage, throttled=throttled
                    )
            finally:  # whatever failed or was cancelled, the slot goes back (once: a settled ticket is skipped)
                ep.abandon(ticket)
            if wait:
                await asyncio.sleep(wait)

    async def _attempt(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """One attempt, bounded as a whole by ``timeout``: (usable response JSON, headers) or Failure."""
        try:
            async with asyncio.timeout(self.timeout):  # the whole attempt, not each read
                if self._vendor is not None:
                    data, headers = await self._vendor.send(self._client, body, self.timeout)
                else:
                    data, headers = await transport.post(
                        self._client, path, body, self.base_url, self.timeout
                    )
        except TimeoutError:
            raise Failure(f"timed out after {self.timeout:g} s") from None
        problem = transport.unusable(path, data)
        if problem is not None:
            raise Failure(problem)
        return data, headers

    def _after_failure(
        self,
        ep: Endpoint,
        ticket: Ticket,
        failure: Failure,
        backoff: Backoff,
        path: str,
        throttled: int = 0,
    ) -> float:
        """Account for a failed attempt: the seconds to wait before the next one, or raise LLMError."""
        if failure.status in THROTTLE_STATUS and failure.kind != "quota":
            asked = failure.wait if failure.wait is not None else _asked_wait(failure.headers)
            was_open = ep.stopped
            try:
                ep.throttled(ticket, asked, failure.headers)
                ep.overloaded_answer(failure.status)
            except ThrottledOut as out:
                if ep.stopped and not was_open:
                    print(
                        scrub_and_shorten(f"error: {ep.stopped}", MESSAGE_LIMIT, [self._key]),
                        file=sys.stderr,
                    )
                raise self._error(
                    path, f"{failure.problem}; {out}", failure.status, backoff.retries, throttled
                ) from None
            return 0.0  # the scheduler holds the next attempt until the endpoint resumes
        systematic = (
            failure.kind in SYSTEMATIC
            or (failure.kind or "").startswith("http_")
            or failure.kind == "quota"
        )
        wait = None
        first_contact = ep.successes == 0 and failure.kind in SYSTEMATIC
        if failure.retry and not first_contact:
            asked = failure.wait if failure.wait is not None else _asked_wait(failure.headers)
            wait = backoff.next_wait(asked)
        if wait is not None:
            ep.abandon(ticket)
            return wait
        error = self._error(path, failure.problem, failure.status, backoff.retries, throttled)
        was_open = ep.stopped
        ep.failed(ticket, failure.kind if systematic else None, self._stop_line(failure))
        if ep.stopped and not was_open:
            print(
                scrub_and_shorten(f"error: {ep.stopped}", MESSAGE_LIMIT, [self._key]),
                file=sys.stderr,
            )
        raise error

    def _stop_line(self, failure: Failure) -> str:
        """The breaker's one line: the cause, the host (never the key) and what to check."""
        hint = stop_hint(failure, self.provider, self.api_key_env)
        problem = scrub_and_shorten(
            failure.problem, MESSAGE_LIMIT, [self._key]
        )  # a server may echo the key
        return f"stopped calling {shown_url(self.base_url)} after its first calls all failed: {problem} ({hint})"

    def _error(
        self, path: str, problem: str, status: int | None, retries: int, throttled: int = 0
    ) -> LLMError:
        tail = f" (after {retries} retries)" if retries else ""
        msg = f"{shown_url(self.base_url)}{path}: {problem}{tail}"
        return LLMError(
            scrub_and_shorten(msg, MESSAGE_LIMIT, [self._key]),
            status=status,
            retries=retries,
            throttled=throttled,
        )
