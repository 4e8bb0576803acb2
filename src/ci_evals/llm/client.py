"""The one OpenAI-compatible client wrapper: shared connections, retries, timeouts, cache, usage.

Every LLM judge, the model target and embedding metrics call models through :class:`LLM`, so
OpenAI, Azure-compatible gateways, vLLM, Ollama and LiteLLM all behave the same way:

* Endpoint: ``base_url`` / ``api_key_env`` from the spec, else ``OPENAI_BASE_URL`` /
  ``OPENAI_API_KEY`` (:mod:`ci_evals.llm.openai_api`). A custom base URL needs no key (local
  servers); the real OpenAI API does.
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
* Token usage and cost per call (:func:`ci_evals.llm.prices.price`: the suite's ``pricing``, then
  the price list); :class:`~ci_evals.llm.cost.Tally` sums calls into the grade/trajectory
  metadata keys the runner aggregates. Each result says how long the call waited in our own
  queue and rate-limit pauses (``waited_s``).
* The run's budget (:class:`~ci_evals.config.budget.Budget`): every attempt asks it before it is
  sent, and every priced answer is charged to it. Once ``max_cost_usd`` is spent a call fails
  with an :class:`LLMError` of category ``budget`` without reaching the server (never retried).

Error messages never contain the API key (:mod:`ci_evals.llm.errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import time
from pathlib import Path
from typing import Any

from ci_evals._util.bounds import check_url
from ci_evals._util.netcause import SYSTEMATIC
from ci_evals._util.redact import MESSAGE_LIMIT, register, scrub_and_shorten
from ci_evals._util.retry import Backoff
from ci_evals._util.retry import retry_after as _asked_wait
from ci_evals.config.budget import Budget, BudgetExceeded
from ci_evals.llm import pool, prices, transport
from ci_evals.llm.cache import ResponseCache, cache_key
from ci_evals.llm.cost import LLMResult, usage_of
from ci_evals.llm.errors import LLMError, call_error, shown_url
from ci_evals.llm.failures import Failure
from ci_evals.llm.hints import stop_line
from ci_evals.llm.limits import estimate_tokens
from ci_evals.llm.openai_api import NO_KEY, resolve_endpoint
from ci_evals.llm.provider_base import Provider
from ci_evals.llm.providers import require, vendor
from ci_evals.llm.scheduler import THROTTLE_STATUS, Endpoint, EndpointStopped, ThrottledOut, Ticket

DEFAULT_BASE_URL = transport.DEFAULT_BASE_URL
BACKOFF_BASE = 0.5
"""Seconds: the first retry waits up to this long, doubling each time (full jitter)."""
BACKOFF_CAP = 20.0
MAX_RETRY_AFTER = 60.0
"""A server's ``Retry-After`` is honoured up to this many seconds."""


_JITTER = random.Random()
"""One generator for every call's backoff jitter (seeding one per call cost CPU at 200 in flight)."""


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds a response asks us to wait (every form :func:`ci_evals._util.retry.retry_after`
    reads), at most ``MAX_RETRY_AFTER``."""
    asked = _asked_wait(headers)
    return None if asked is None else min(asked, MAX_RETRY_AFTER)


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
        budget: the run's budget (``ctx.budget``): asked before every attempt, charged after
            every priced answer; None: no budget.
        pricing: the suite's ``pricing`` (``ctx.pricing``), tried before the price list.
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
        budget: Budget | None = None,
        pricing: dict[str, Any] | None = None,
    ) -> None:
        if base_url is not None:
            check_url(base_url, f"{owner}.base_url" if owner else "base_url")
        self.provider = provider
        self._vendor: Provider[Any] | None = None
        self.spec_base_url = base_url
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.max_retries = max_retries
        self.cache = ResponseCache(cache_dir) if cache_dir is not None else None
        self.owner = owner
        self.base_url = DEFAULT_BASE_URL
        self._key: str | None = None
        self._client: Any = None
        self._pool_key: pool.ClientKey | None = None
        self._state: pool.LoopState | None = None
        self.endpoint: Endpoint | None = None
        self.budget = budget
        self.pricing = pricing

    def prepare(self) -> None:
        """Import aiohttp or the vendor's SDK ahead of :meth:`start` (a failing import is start's to
        report); then the price list loads on a background thread (not beside that import: it
        would only slow it, both take the CPU), while the run waits on the network."""
        with contextlib.suppress(Exception):
            transport.preload(self.provider)
        prices.warm()

    async def start(self) -> None:
        """Resolve the endpoint and borrow the shared client and scheduler for this event loop."""
        if self._client is not None:
            return
        prices.warm()
        if self.provider != "openai":
            require(self.provider, self.owner)
            provider = self._vendor = vendor(self.provider)
            url, key = provider.endpoint(self.spec_base_url, self.api_key_env, self.owner)
            default = provider.default_base_url
        else:
            url, key = resolve_endpoint(self.spec_base_url, self.api_key_env, owner=self.owner)
            default = DEFAULT_BASE_URL
        self.base_url = (url or default).rstrip("/")
        self._key = key
        register(key if key != NO_KEY else None)
        self._pool_key = (self.provider, pool.endpoint_identity(url), key)  # one server, one client
        self._state, self._client, self.endpoint = pool.borrow(  # and one scheduler
            self._pool_key,
            lambda: self._new_client(url, key),
            shown_url(self.base_url),
            self.base_url,
        )

    def _new_client(self, url: str | None, key: str) -> Any:
        """The client this endpoint's calls go through (the vendor's SDK, or :mod:`~ci_evals.llm.transport`'s)."""
        if self._vendor is not None:
            return self._vendor.client(url, key, self.timeout)
        return transport.make_client(url, key, self.timeout)

    async def aclose(self) -> None:
        """Finish cache writes and return the shared client; the last user closes it."""
        if self.cache is not None:
            await self.cache.flush()
        if self._client is None or self._state is None or self._pool_key is None:
            return
        self._client = None
        last = pool.give_back(self._state, self._pool_key)
        if last is not None:
            await (
                self._vendor.close(last)
                if self._vendor is not None
                else transport.close_client(last)
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
        body: dict[str, Any]
        if self.provider != "openai":
            if self._vendor is None:
                await self.start()
            assert self._vendor is not None  # start() chose it
            path, body = self._vendor.request(model, messages, params or {}, response_format)
            return await self._call(path, body, repeat, model)
        body = {"model": model, "messages": messages}
        if params:
            body.update({k: v for k, v in params.items() if v is not None})
        if tools:
            body["tools"] = tools
        if response_format:
            body["response_format"] = response_format
        return await self._call("/chat/completions", body, repeat, model)

    async def embed(self, model: str, inputs: list[str], *, repeat: int = 0) -> LLMResult:
        """One ``/embeddings`` call; vectors are in ``result.embeddings``."""
        return await self._call(
            "/embeddings", {"model": model, "input": list(inputs)}, repeat, model
        )

    async def _call(self, path: str, body: dict[str, Any], repeat: int, model: str) -> LLMResult:
        if self._client is None:
            await self.start()
        if self.cache is None:
            return await self._http(path, body, model)
        key = cache_key(self.base_url + path, body, repeat)
        data = self.cache.get(key)
        if (
            data is not None and transport.unusable(path, data) is None
        ):  # an unusable entry is a miss, overwritten
            return LLMResult(data, cache_hit=True, model=model, cost_usd=0.0)
        state = self._state
        assert state is not None  # start() borrowed it
        cache = self.cache

        async def lead() -> LLMResult:
            result = await self._http(path, body, model)
            cache.put_later(key, result.data)
            return result

        result = await pool.once(state, (str(cache.root), key), lead)
        if result.model is None:  # another call's answer: nothing spent by this one
            result.model, result.cost_usd = model, 0.0
        return result

    def _check_budget(self, retries: int) -> None:
        """Raise the ``budget`` LLMError when the run's budget is spent: the attempt is not sent."""
        if self.budget is None:
            return
        try:
            self.budget.check()
        except BudgetExceeded as exc:
            raise LLMError(str(exc), retries=retries, category="budget") from None

    async def _http(self, path: str, body: dict[str, Any], model: str) -> LLMResult:
        """Attempts through the endpoint's scheduler until one succeeds or a failure is final.

        Throttling answers (429, 503, 529) are waits the scheduler manages and never use the
        retry budget; other transient failures are retried with backoff (``max_retries``).
        ``waited_s`` counts the time spent getting a slot (the queue, a pause, the pace).
        """
        ep = self.endpoint
        assert ep is not None  # start() borrowed it
        max_wait = ep.limits.max_wait  # no wait of ours passes it, a backoff's included
        backoff = Backoff(
            base=BACKOFF_BASE,
            cap=min(BACKOFF_CAP, max_wait),
            max_retries=self.max_retries,
            max_retry_after=min(MAX_RETRY_AFTER, max_wait),
            rng=_JITTER,
        )
        tokens = estimate_tokens(body) if ep.pace.tok_bucket is not None else 0.0
        first_throttle: float | None = None
        front = False
        throttled = 0
        waited = 0.0
        try:
            while True:
                self._check_budget(backoff.retries)
                since = time.monotonic()
                try:
                    ticket = await ep.acquire(tokens, front=front)
                except EndpointStopped as stop:
                    problem = f"not sent: {stop.cause}"
                    raise self._error(path, problem, None, backoff.retries) from None
                finally:
                    waited += time.monotonic() - since
                ticket.first_throttle = first_throttle
                try:
                    self._check_budget(backoff.retries)  # spent while this call waited
                    try:
                        data, headers = await self._attempt(path, body)
                    except Failure as failure:
                        throttled += failure.status in THROTTLE_STATUS and failure.kind != "quota"
                        wait = self._after_failure(ep, ticket, failure, backoff, path, throttled)
                        first_throttle, front = ticket.first_throttle, True
                    else:
                        usage = usage_of(data)
                        ep.success(
                            ticket, headers, usage["prompt_tokens"] + usage["completion_tokens"]
                        )
                        cost = prices.price(model, usage, self.pricing, self.base_url)
                        if self.budget is not None:
                            self.budget.charge(cost, model if cost is None else None)
                        return LLMResult(
                            data,
                            retries=backoff.retries,
                            usage=usage,
                            throttled=throttled,
                            waited_s=waited,
                            model=model,
                            cost_usd=cost,
                        )
                finally:  # whatever failed or was cancelled, the slot goes back (once: a settled ticket is skipped)
                    ep.abandon(ticket)
                if wait:
                    await asyncio.sleep(wait)
        except LLMError as exc:
            exc.waited_s = waited
            raise

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
                self._say_stopped(ep, was_open)
                problem = f"{failure.problem}; {out}"
                raise self._error(
                    path, problem, failure.status, backoff.retries, throttled
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
        line = stop_line(failure, self.provider, self.api_key_env, self.base_url, self._key)
        ep.failed(ticket, failure.kind if systematic else None, line)
        self._say_stopped(ep, was_open)
        raise error

    def _error(
        self, path: str, problem: str, status: int | None, retries: int, throttled: int = 0
    ) -> LLMError:
        """The LLMError of a call to this endpoint's ``path`` that failed for good (no key in it)."""
        return call_error(self.base_url, self._key, path, problem, status, retries, throttled)

    def _say_stopped(self, ep: Endpoint, was_open: str | None) -> None:
        """The breaker's line on stderr, once: when this failure is the one that stopped ``ep``."""
        if ep.stopped and not was_open:
            print(
                scrub_and_shorten(f"error: {ep.stopped}", MESSAGE_LIMIT, [self._key]),
                file=sys.stderr,
            )
