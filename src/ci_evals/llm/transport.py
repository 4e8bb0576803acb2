"""One OpenAI-compatible ``POST``: the SDK client per endpoint, and the cheapest way through it.

:func:`make_client` builds one :class:`Client` per endpoint around an ``AsyncOpenAI`` client (the
SDK's own retries off: :class:`~ci_evals.llm.client.LLM` retries, counting and honouring
``Retry-After``) over the SDK's aiohttp transport (``openai[aiohttp]``) when installed, else its
httpx client. :func:`post` sends one request and returns (the response JSON, its headers) or raises
:class:`~ci_evals.llm.failures.Failure` naming the cause; every path maps failures the same way.

Why not ``client.chat.completions.create`` for every call: at high concurrency the run was
CPU-bound in the SDK's per-call request building, then in the httpx-compatible layer the SDK puts
over aiohttp (issue 21, profiled with cProfile at 200 calls in flight: that layer cost as much
CPU per call as aiohttp itself). So a call goes, cheapest first:

1. **aiohttp direct**: the same ``aiohttp`` the SDK's transport uses, one session per endpoint,
   calling the URL the SDK calls with ci-evals' own identity (``User-Agent: ci-evals/<version>``,
   no ``X-Stainless-*``: :func:`ci_evals.llm.answers.identity_headers`), the key, and the
   organization and project as the SDK reads them. Used when the aiohttp transport is installed
   and no proxy applies to the URL (a proxy from the environment and a URL with ``user:password``
   go through the SDK's own client, which handles them). This path does not import the SDK, whose
   import alone (its generated types) cost about a CPU-second inside every run.
2. **the SDK's HTTP client** (httpx), with the same headers (``DIRECT``; ``USE_AIOHTTP`` off).
3. **the SDK's ``post``** (``DIRECT`` off: tests cover it so the SDK's own path keeps working).

A response body is read up to ``MAX_RESPONSE_BYTES`` (a parse never recurses without bound); a 200 not
usable (no ``choices[0].message``, no embeddings; :func:`unusable`) is a Failure, so it is retried
and never cached; an error object inside a 200 is the server's failure (:mod:`ci_evals.llm.answers`);
every failure line carries the server's message and request id. No path follows a redirect (``failures.NO_REDIRECTS``): a 3xx is a Failure.
"""

from __future__ import annotations

import functools
import importlib
import json
import ssl
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import orjson

from ci_evals._util.bounds import NOT_READ, announced_length, orjson_loads
from ci_evals._util.netcause import IDLE_REUSE_S, sdk_limits
from ci_evals.llm.answers import error_answer, error_in_200, identity_headers, unusable
from ci_evals.llm.failures import Failure, status_failure, transport_failure
from ci_evals.llm.providers import preload_sdk
from ci_evals.llm.said import server_says

__all__ = ["Client", "close_client", "has_session", "make_client", "post", "preload", "unusable"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
USE_AIOHTTP = True  # tests switch it off to exercise httpx's own transport too
DIRECT = True  # skip the SDK's request building (tests switch it off to cover the SDK's post)
MAX_RESPONSE_BYTES = 16 * 2**20
"""An LLM answer larger than this (16 MiB) is an error for the call, read no further: a server
sending a 300 MB body must not take the run's memory with it."""


@dataclass(slots=True)
class _Direct:
    """One endpoint's way past the SDK's per-call request building: the base URL, the headers
    (:func:`~ci_evals.llm.answers.identity_headers`), an aiohttp session when the aiohttp path applies (else None), and the SDK's HTTP
    client when a call goes through it (built only then: see :func:`make_client`)."""

    base: str
    headers: dict[str, str]
    session: Any = None
    http: Any = None


@dataclass(eq=False, slots=True)
class Client:
    """One endpoint's client (shared by every grader and target of the run, see :mod:`ci_evals.llm.pool`).

    ``sdk`` is the ``AsyncOpenAI`` client; on the aiohttp direct path it is built only when
    something asks for it, since ``import openai`` alone costs about a CPU-second (its generated
    types), paid inside every run before the first call (issue 21).
    """

    url: str | None
    key: str
    timeout: float
    direct: _Direct | None = None
    _sdk: Any = None

    @property
    def sdk(self) -> Any:
        if self._sdk is None:
            self._sdk = _sdk_client(self.url, self.key, self.timeout, None)
        return self._sdk

    def is_closed(self) -> bool:
        """Closed by :func:`close_client` (as ``AsyncOpenAI.is_closed``)."""
        session = self.direct.session if self.direct is not None else None
        return (session.closed if session is not None else True) and (
            self._sdk is None or self._sdk.is_closed()
        )


def preload(provider: str = "openai") -> None:
    """Import what calls to ``provider`` will use (the direct path's aiohttp: 0.15 s here; a vendor's
    SDK), ahead of the run; ImportError when it is not installed."""
    if provider != "openai":
        preload_sdk(provider)
    elif USE_AIOHTTP and DIRECT:
        import aiohttp  # noqa: F401


def make_client(url: str | None, key: str, timeout: float) -> Client:
    """One endpoint's client, with the SDK's retries off (see the module docstring).

    With the aiohttp direct path (aiohttp installed, no proxy, no ``user:password`` in the URL),
    the SDK is not imported: the headers are ci-evals' own (:func:`identity_headers`), the URL is
    the one the SDK would call. Otherwise the SDK's client is built now and its HTTP client carries
    the calls, with the same headers.
    """
    client = Client(url, key, timeout)
    base = (url or DEFAULT_BASE_URL).rstrip("/")
    # aiohttp refuses a URL with user:password alongside the SDK's Authorization header; httpx sends it.
    has_userinfo = "@" in urllib.parse.urlsplit(base).netloc
    session = None
    if USE_AIOHTTP and not has_userinfo and DIRECT:
        aiohttp: ModuleType | None
        try:
            import aiohttp  # (the extra that the SDK's DefaultAioHttpClient needs)
        except ImportError:
            aiohttp = None
        headers = identity_headers(key)
        session = _session(aiohttp, base, headers) if aiohttp is not None else None
    if session is not None:
        client.direct = _Direct(base, headers, session)
        return client
    http_client = _http_client(timeout, aiohttp=USE_AIOHTTP and not has_userinfo)
    sdk = client._sdk = _sdk_client(url, key, timeout, http_client)
    if DIRECT:
        client.direct = _Direct(
            str(sdk.base_url).rstrip("/"), identity_headers(key), None, http_client
        )
    return client


def _http_client(timeout: float, aiohttp: bool = True) -> Any:
    """The SDK's aiohttp transport when installed (and ``aiohttp``), else its httpx client."""
    from openai import DefaultAsyncHttpxClient

    if aiohttp:
        try:
            from openai import DefaultAioHttpClient

            return DefaultAioHttpClient(timeout=timeout, follow_redirects=False)
        except (ImportError, RuntimeError):
            pass
    limits = sdk_limits(DefaultAsyncHttpxClient, 1000, 100)  # the SDK's, idle ones kept shorter
    return DefaultAsyncHttpxClient(timeout=timeout, follow_redirects=False, limits=limits)


def _sdk_client(url: str | None, key: str, timeout: float, http_client: Any) -> Any:
    from openai import AsyncOpenAI

    return AsyncOpenAI(
        api_key=key,
        base_url=url,
        max_retries=0,
        timeout=timeout,
        http_client=http_client if http_client is not None else _http_client(timeout, USE_AIOHTTP),
    )


def _session(aiohttp: Any, base: str, headers: dict[str, str]) -> Any:
    """An aiohttp session for ``base`` sending ``headers`` with every call (the session's own: merged
    once a call, not converted from a dict each time), or None when a proxy from the environment
    applies to it."""
    host = urllib.parse.urlsplit(base).hostname or ""
    proxies = urllib.request.getproxies()
    if (
        proxies
        and not urllib.request.proxy_bypass(host)
        and any(k in proxies for k in (urllib.parse.urlsplit(base).scheme, "all"))
    ):
        return None
    ctx = _ssl_context() if base.startswith("https:") else None
    # No connection cap here: the endpoint's scheduler bounds calls in flight. No aiohttp timeout:
    # LLM bounds each attempt as a whole.
    connector = aiohttp.TCPConnector(
        limit=0, keepalive_timeout=IDLE_REUSE_S, ssl=ctx if ctx is not None else True
    )
    return aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None), headers=headers
    )


def _ssl_context() -> ssl.SSLContext:
    """The certificates the SDK's own HTTP library trusts (``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, then its
    default store), through that library's public ``create_ssl_context``: httpx2 (the SDK's since
    2.x), else httpx."""
    for name in ("httpx2", "httpx"):
        try:
            lib = sys.modules.get(name) or importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(lib, "create_ssl_context"):
            return lib.create_ssl_context()
    return ssl.create_default_context()


async def close_client(client: Client) -> None:
    """Close the endpoint's aiohttp session and the SDK client if one was built."""
    try:
        if client._sdk is not None:
            await client._sdk.close()
    finally:
        if client.direct is not None and client.direct.session is not None:
            await client.direct.session.close()


def has_session(client: Client) -> bool:
    """Whether calls to ``client``'s endpoint take the aiohttp direct path."""
    return client.direct is not None and client.direct.session is not None


async def post(
    client: Client, path: str, body: dict[str, Any], base_url: str, timeout: float
) -> tuple[dict[str, Any], Any]:
    """One ``POST`` of ``body`` to ``path``: (the response JSON, its headers), or :class:`Failure`."""
    direct = client.direct if DIRECT else None
    if direct is None:
        return await _sdk_post(client.sdk, path, body, base_url, timeout)
    payload = _payload(body)
    try:
        if direct.session is not None:
            status, raw, headers = await _aiohttp_post(direct, path, payload)
        else:
            status, raw, headers = await _http_post(direct, path, payload)
    except Failure:
        raise
    except Exception as exc:  # the transport's errors (aiohttp or httpx), named by their cause
        if not (
            isinstance(exc, OSError | TimeoutError)
            or type(exc).__module__.split(".")[0]
            in ("httpx", "httpx2", "httpcore", "httpcore2", "aiohttp", "openai")
        ):
            raise
        raise transport_failure(exc, base_url, timeout) from None
    data = _json_or_none(raw)
    if status >= 300:
        raise error_answer(status, data, headers)
    if not isinstance(data, dict):
        raise Failure("the response body is not valid JSON")
    failure = error_in_200(path, data, headers)  # OpenRouter: {"error": {...}} with status 200
    if failure is not None:
        raise failure
    return data, headers


async def _aiohttp_post(direct: _Direct, path: str, payload: bytes) -> tuple[int, bytes, Any]:
    async with direct.session.post(
        direct.base + path, data=payload, allow_redirects=False
    ) as response:  # no 3xx followed
        headers, declared = response.headers, announced_length(response.headers)
        if (
            declared is not None
            and declared <= MAX_RESPONSE_BYTES
            and "content-encoding" not in headers
        ):
            return (
                response.status,
                await response.read(),
                headers,
            )  # the announced bytes (compressed: read capped)
        return (
            response.status,
            await _capped(response.content.iter_any(), headers, response.status),
            headers,
        )


async def _http_post(direct: _Direct, path: str, payload: bytes) -> tuple[int, bytes, Any]:
    request = direct.http.build_request(
        "POST", direct.base + path, headers=direct.headers, content=payload
    )
    response = await direct.http.send(request, stream=True)
    try:
        raw = await _capped(response.aiter_bytes(), response.headers, response.status_code)
    finally:
        await response.aclose()
    return response.status_code, raw, response.headers


async def _capped(chunks: Any, headers: Any, status: int) -> bytes:
    """The body, read up to ``MAX_RESPONSE_BYTES`` (a Failure past it, or when it announces more; not retried)."""
    declared = announced_length(headers)
    if declared is not None and declared > MAX_RESPONSE_BYTES:
        raise Failure(
            f"the response body is larger than {MAX_RESPONSE_BYTES // 2**20} MiB ({declared} bytes "
            "announced)",
            status,
            retry=False,
        )
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise Failure(
                f"the response body is larger than {MAX_RESPONSE_BYTES // 2**20} MiB",
                status,
                retry=False,
            )
        parts.append(chunk)
    return b"".join(parts)


async def _sdk_post(
    client: Any, path: str, body: dict[str, Any], base_url: str, timeout: float
) -> tuple[dict[str, Any], Any]:
    """Through the SDK's own ``post`` (its request building, its HTTP client)."""
    import openai

    try:  # the client carries the timeout; no per-call options to merge
        response = await client.post(path, cast_to=_raw_response(), body=body)
        raw = await response.read()
    except openai.APIStatusError as exc:
        raise status_failure(
            exc.status_code,
            server_says(_error_text(exc), exc.response.headers),
            exc.response.headers,
            _error_code(exc),
        ) from None
    except openai.APIError as exc:
        if (
            isinstance(exc, openai.APIConnectionError | openai.APITimeoutError)
            or exc.__cause__ is not None
        ):
            raise transport_failure(exc, base_url, timeout) from None
        raise Failure(str(exc), retry=False) from None
    except (OSError, TimeoutError) as exc:  # a transport error the SDK did not wrap (a read)
        raise transport_failure(exc, base_url, timeout) from None
    data = _json_or_none(raw)
    if not isinstance(data, dict):
        raise Failure("the response body is not valid JSON")
    failure = error_in_200(path, data, response.headers)
    if failure is not None:
        raise failure
    return data, response.headers


def _payload(body: dict[str, Any]) -> bytes:
    """The request body as UTF-8 JSON. orjson costs a tenth of ``json`` per call (at 200 calls in
    flight the encoding was 4 % of the run's CPU); ``json`` writes what orjson refuses (an integer
    over 64 bits, a lone surrogate, a key that is not a string) as it always did."""
    try:
        return orjson.dumps(body)
    except TypeError:  # orjson.JSONEncodeError included
        return json.dumps(body).encode("utf-8")


def _json_or_none(raw: bytes) -> Any:
    """The body's JSON value, or None when it is not JSON (the caller says what it needed). orjson
    reads it when it reads it as ``json`` does (:func:`bounds.orjson_loads`; it stops at 1,024 levels),
    else ``json``: a body nested past the interpreter's limit is not JSON, not a RecursionError."""
    data = orjson_loads(bytes(raw))
    if data is not NOT_READ:
        return data
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
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


def _error_text(exc: Any) -> str:
    """The server's error message (from the JSON body when there is one), whole."""
    body = getattr(exc, "body", None)
    text = body.get("message") if isinstance(body, dict) else None
    return str(text or getattr(exc, "message", "") or "no details")
