"""The vendor layer under :class:`ci_evals.llm.LLM`: Anthropic and Google (Gemini) judges.

:class:`~ci_evals.llm.LLM` keeps everything that must behave the same for every vendor (the
retry loop, ``Retry-After``, the response cache, in-flight sharing, tokens and cost). A
:class:`Provider` only knows its vendor: where the key and base URL come from, how to build the
vendor's official SDK client (with the SDK's own retries off), how an OpenAI-shaped chat request
becomes the vendor's request, and how one attempt's outcome becomes either a chat-completions
shaped response (``choices[0].message.content`` and ``usage.prompt_tokens`` /
``completion_tokens``) or a :class:`Failure`.

Requests follow what letta-evals (0.17+, ``graders/rubric.py``) sends: Anthropic gets
``output_config.format`` JSON schema and the system prompt as a cached text block
(``cache_control: ephemeral``), ``max_tokens`` 4096; Gemini gets ``responseMimeType:
application/json`` with ``responseSchema`` and the system prompt as ``systemInstruction``.

The SDKs are optional extras, imported only when a call is made; :func:`require` turns a missing
one into a one-line ConfigError naming the pip command.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

from ci_evals._util.errors import ConfigError
from ci_evals._util.netcause import cause_of
from ci_evals._util.text import one_line
from ci_evals.llm.cost import tokens
from ci_evals.llm.said import server_says

PROVIDERS = ("openai", "anthropic", "google")
_EXTRAS = {
    "anthropic": ("anthropic", "anthropic>=0.80"),
    "google": ("google.genai", "google-genai>=1.30"),
}
"""provider -> (module, pip requirement): the same requirement as pyproject's extra of that name."""
NO_KEY = "no-key-required"
NO_REDIRECTS = {"allow_redirects": False, "follow_redirects": False}
"""What every LLM call's HTTP client is told (aiohttp's name, httpx's name): follow no redirect. A
3xx is a failure naming where it points: the key, the prompt and the body never go to another
host, nor from https to http (google-genai sent ``x-goog-api-key`` on to any origin)."""
ANTHROPIC_MAX_TOKENS = 4096


@dataclass
class Failure(Exception):
    """One attempt failed. ``retry``: worth another attempt; ``wait``: seconds the server asked for;
    ``headers``: the response headers (``Retry-After`` is read from them by the caller);
    ``kind``: a cause the breaker counts (:mod:`ci_evals._util.netcause` kinds, ``http_401``...)."""

    problem: str
    status: int | None = None
    retry: bool = True
    wait: float | None = None
    headers: Any = None
    kind: str | None = None


def require(provider: str, owner: str | None = None) -> None:
    """ConfigError (one line, with the pip command) when the provider's SDK is not installed."""
    if provider not in _EXTRAS:
        return
    from importlib.util import find_spec

    module, requirement = _EXTRAS[provider]
    try:
        found = find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(
            f"provider '{provider}' needs the {module} SDK: pip install '{requirement}' "
            f"(the ci-evals[{provider}] extra)",
            key=owner,
        )


def preload_sdk(provider: str) -> None:
    """Import ``provider``'s SDK ahead of the run (ImportError when it is not installed)."""
    if provider in _EXTRAS:
        importlib.import_module(_EXTRAS[provider][0])


def status_failure(
    status: int, text: str, headers: Any, code: str | None = None, *, label: str | None = None
) -> Failure:
    """The Failure for an HTTP error answer (any provider): throttling, systematic, or transient.
    A redirect (3xx) is never followed (see :data:`NO_REDIRECTS`): systematic, not retried.
    ``label`` replaces ``HTTP <status>`` at the line's start (an error code inside an HTTP 200)."""
    shown = label or f"HTTP {status}"
    if 300 <= status < 400:
        return Failure(
            f"HTTP {status}: the server redirects{_redirect_target(headers)}; LLM calls follow no "
            "redirect (the key goes to base_url's host alone): set base_url to the address it names",
            status,
            retry=False,
            headers=headers,
            kind=f"http_{status}",
        )
    if status == 429 and code == "insufficient_quota":
        return Failure(f"{shown}: {text}", status, retry=False, headers=headers, kind="quota")
    if status in (400, 401, 403, 404):
        return Failure(
            f"{shown}: {text}", status, retry=False, headers=headers, kind=f"http_{status}"
        )
    return Failure(f"{shown}: {text}", status, retryable_status(status), headers=headers)


def _redirect_target(headers: Any) -> str:
    """`` to <where the Location header points>`` (no user:password, query or fragment), or ''."""
    try:
        parts = urllib.parse.urlsplit(str(headers.get("location") or "").strip())
    except (AttributeError, ValueError):
        return ""
    host = parts.netloc.rsplit("@", 1)[-1]
    where = one_line(f"{parts.scheme}://{host}{parts.path}" if host else parts.path)[:200]
    return f" to {where}" if where else ""


def transport_failure(exc: BaseException, url: Any, timeout: float) -> Failure:
    """A call that got no HTTP answer, named by its real cause (:func:`ci_evals._util.netcause.cause_of`)."""
    cause = cause_of(exc, str(url) if url else None, timeout)
    return Failure(cause.message, retry=cause.retry, kind=cause.kind)


def retryable_status(status: int) -> bool:
    """429, 408, 409 and every 5xx (Anthropic's 529 ``overloaded`` included)."""
    return status in (408, 409, 429) or status >= 500


def _system_and_turns(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """System messages joined into one text; the other messages as (role, text) turns."""
    system = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    turns = [m for m in messages if m.get("role") != "system"]
    return ("\n\n".join(system) if system else None), turns


def _schema(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    if response_format and response_format.get("type") == "json_schema":
        return (response_format.get("json_schema") or {}).get("schema")
    return None


def chat_response(
    text: str,
    finish: str | None,
    prompt_tokens: int,
    completion_tokens: int,
    vendor_usage: dict[str, Any] | None,
) -> dict[str, Any]:
    """A vendor reply in the chat-completions shape the rest of ci-evals reads (and caches)."""
    return {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "vendor_usage": vendor_usage or {},
    }


def _env_key(
    api_key_env: str | None,
    names: tuple[str, ...],
    url: str | None,
    owner: str | None,
    provider: str,
) -> str:
    """The key from ``api_key_env`` or the first set name; a custom base URL needs none."""
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise ConfigError(
                f"environment variable {api_key_env} (api_key_env) is not set", key=owner
            )
        return key
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    if url is None:
        raise ConfigError(
            f"{' or '.join(names)} is not set; set it for provider '{provider}', or point base_url "
            f"at a compatible server",
            key=owner,
        )
    return NO_KEY


class Provider:
    """One vendor. ``path`` names the endpoint in messages and in the cache key."""

    name = ""
    default_base_url = ""

    def endpoint(
        self, base_url: str | None, api_key_env: str | None, owner: str | None
    ) -> tuple[str | None, str]:
        raise NotImplementedError

    def client(self, url: str | None, key: str, timeout: float) -> Any:
        raise NotImplementedError

    def request(
        self,
        model: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        response_format: dict[str, Any] | None,
    ) -> tuple[str, dict[str, Any]]:
        """(path, the vendor's JSON request body) for an OpenAI-shaped chat call."""
        raise NotImplementedError

    async def send(self, client: Any, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One attempt: the chat-shaped response, or :class:`Failure`."""
        raise NotImplementedError

    async def close(self, client: Any) -> None:
        raise NotImplementedError


class Anthropic(Provider):
    """Claude through ``anthropic.AsyncAnthropic`` (Messages API)."""

    name = "anthropic"
    default_base_url = "https://api.anthropic.com"

    def endpoint(self, base_url, api_key_env, owner):
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        return url, _env_key(api_key_env, ("ANTHROPIC_API_KEY",), url, owner, self.name)

    def client(self, url, key, timeout):
        from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient

        return AsyncAnthropic(
            api_key=key,
            base_url=url,
            max_retries=0,
            timeout=timeout,
            http_client=DefaultAsyncHttpxClient(timeout=timeout, follow_redirects=False),
        )

    def request(self, model, messages, params, response_format):
        system, turns = _system_and_turns(messages)
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": params.get("max_tokens") or ANTHROPIC_MAX_TOKENS,
            "messages": [{"role": m["role"], "content": m.get("content") or ""} for m in turns],
        }
        if params.get("temperature") is not None:
            body["temperature"] = params["temperature"]
        if system is not None:
            body["system"] = [
                {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
            ]
        schema = _schema(response_format)
        if schema is not None:
            from anthropic import transform_schema

            body["output_config"] = {
                "format": {"type": "json_schema", "schema": transform_schema(schema)}
            }
        return "/v1/messages", body

    async def send(self, client, body, timeout):
        import anthropic

        # The raw POST sends exactly letta-evals' body whatever parameters this SDK version types.
        try:
            response = await client.post(
                "/v1/messages", cast_to=anthropic.AsyncAPIResponse[object], body=body
            )
            raw = await response.read()
        except anthropic.APIStatusError as exc:
            err = exc.body.get("error") if isinstance(exc.body, dict) else None
            text = err.get("message") if isinstance(err, dict) else None
            raise status_failure(
                exc.status_code,
                server_says(text or exc.message, exc.response.headers),
                exc.response.headers,
            ) from None
        except (anthropic.APIConnectionError, OSError, TimeoutError) as exc:
            raise transport_failure(exc, client.base_url, timeout) from None
        except RecursionError:  # the SDK's json.loads of a deeply nested error body
            raise Failure(
                "the response body is not a Messages API response (nested too deep)"
            ) from None
        try:
            data = json.loads(raw)
            blocks, usage = data["content"], data.get("usage")
            usage = (
                usage if isinstance(usage, dict) else {}
            )  # counts read bounded: a bad one is 0, never a failure
            text = "".join(b["text"] for b in blocks if b.get("type") == "text")
            prompt = sum(
                tokens(usage.get(k))
                for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            )
            completion = tokens(usage.get("output_tokens"))
        except (
            ValueError,
            TypeError,
            KeyError,
            AttributeError,
            RecursionError,
        ):  # (a 200,000-deep body)
            raise Failure("the response body is not a Messages API response") from None
        return chat_response(
            text, data.get("stop_reason"), prompt, completion, usage
        ), response.headers

    async def close(self, client):
        await client.close()


_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


class Google(Provider):
    """Gemini through ``google.genai.Client(...).aio`` (``generateContent``)."""

    name = "google"
    default_base_url = "https://generativelanguage.googleapis.com"

    def endpoint(self, base_url, api_key_env, owner):
        url = base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or None
        self.base_url = url or self.default_base_url
        return url, _env_key(
            api_key_env, ("GEMINI_API_KEY", "GOOGLE_API_KEY"), url, owner, self.name
        )

    def client(self, url, key, timeout):
        from google import genai
        from google.genai import types

        options = types.HttpOptions(
            base_url=url,
            timeout=int(timeout * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
            async_client_args=dict(NO_REDIRECTS),
        )  # its aiohttp's and its httpx's names
        return genai.Client(api_key=key, http_options=options)

    def request(self, model, messages, params, response_format):
        system, turns = _system_and_turns(messages)
        body: dict[str, Any] = {
            "model": model,
            "contents": [
                {
                    "role": "model" if m["role"] == "assistant" else "user",
                    "parts": [{"text": str(m.get("content") or "")}],
                }
                for m in turns
            ],
        }
        if system is not None:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        config: dict[str, Any] = {}
        if params.get("temperature") is not None:
            config["temperature"] = params["temperature"]
        if response_format:
            config["responseMimeType"] = "application/json"
            schema = _schema(response_format)
            if schema is not None:
                config["responseSchema"] = schema
        if config:
            body["generationConfig"] = config
        return f"/v1/models/{model}:generateContent", body

    async def send(self, client, body, timeout):

        from google.genai import errors, types

        gen = body.get("generationConfig") or {}
        system = body.get("systemInstruction")
        config = types.GenerateContentConfig(
            system_instruction=system["parts"][0]["text"] if system else None,
            temperature=gen.get("temperature"),
            response_mime_type=gen.get("responseMimeType"),
            response_schema=gen.get("responseSchema"),
        )
        try:
            response = await client.aio.models.generate_content(
                model=body["model"], contents=body["contents"], config=config
            )
        except errors.APIError as exc:
            headers = getattr(exc.response, "headers", None)
            failure = status_failure(
                exc.code, server_says(exc.message or exc.status, headers), headers
            )
            failure.wait = _retry_delay(exc.details)
            raise failure from None
        except TimeoutError:
            raise Failure(f"timed out after {timeout:g} s") from None
        except Exception as exc:  # the transport's connection errors (httpx or aiohttp)
            if (
                isinstance(exc, OSError)
                or "Timeout" in type(exc).__name__
                or any(
                    c.__module__.split(".")[0] in ("httpx", "aiohttp", "httpx2")
                    for c in type(exc).__mro__
                )
            ):
                raise transport_failure(
                    exc, getattr(self, "base_url", self.default_base_url), timeout
                ) from None
            if isinstance(
                exc, ValueError | RecursionError
            ):  # a body the SDK could not read (or too deep)
                raise Failure(f"unusable response: {one_line(exc)}") from None
            raise
        u = response.usage_metadata
        vendor = u.model_dump(mode="json", exclude_none=True) if u is not None else {}
        prompt = (u.prompt_token_count or 0) if u is not None else 0
        completion = (
            ((u.candidates_token_count or 0) + (u.thoughts_token_count or 0))
            if u is not None
            else 0
        )
        finish = None
        if response.candidates and response.candidates[0].finish_reason is not None:
            finish = str(response.candidates[0].finish_reason.value)
        http = getattr(response, "sdk_http_response", None)
        return chat_response(response.text or "", finish, prompt, completion, vendor), getattr(
            http, "headers", None
        )

    async def close(self, client):
        close = getattr(client.aio, "aclose", None)  # google-genai >= 1.33
        if close is not None:
            await close()


def _retry_delay(details: Any) -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` detail (``"retryDelay": "2.5s"``), if any."""
    error = details.get("error") if isinstance(details, dict) else None
    for item in (error or {}).get("details") or []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            m = _DELAY.match(str(item.get("retryDelay", "")))
            if m:
                return float(m.group(1))
    return None


def vendor(name: str) -> Provider:
    """The provider object for ``anthropic`` or ``google``."""
    return {"anthropic": Anthropic, "google": Google}[name]()
