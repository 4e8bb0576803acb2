"""The vendor layer under :class:`ci_evals.llm.LLM`: Anthropic and Google (Gemini) judges.

:class:`~ci_evals.llm.LLM` keeps everything that must behave the same for every vendor (the
retry loop, ``Retry-After``, the response cache, in-flight sharing, tokens and cost). A
:class:`~ci_evals.llm.provider_base.Provider` only knows its vendor: where the key and base URL
come from, how to build the vendor's official SDK client (with the SDK's own retries off), how an
OpenAI-shaped chat request becomes the vendor's request, and how one attempt's outcome becomes
either a chat-completions shaped response (``choices[0].message.content`` and
``usage.prompt_tokens`` / ``completion_tokens``) or a :class:`~ci_evals.llm.failures.Failure`.

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
from typing import TYPE_CHECKING, Any

from ci_evals._util.errors import ConfigError
from ci_evals._util.text import one_line
from ci_evals.llm.cost import tokens
from ci_evals.llm.failures import NO_REDIRECTS, Failure, status_failure, transport_failure
from ci_evals.llm.provider_base import (
    Provider,
    chat_response,
    env_key,
    json_schema,
    system_and_turns,
)
from ci_evals.llm.said import server_says

if TYPE_CHECKING:  # the SDKs are optional extras, imported when a call is made
    from anthropic import AsyncAnthropic
    from google.genai import Client as GenaiClient

PROVIDERS = ("openai", "anthropic", "google")
_EXTRAS = {
    "anthropic": ("anthropic", "anthropic>=2.0"),
    "google": ("google.genai", "google-genai>=3.0"),
}
"""provider -> (module, pip requirement): the same requirement as pyproject's extra of that name."""
ANTHROPIC_MAX_TOKENS = 4096
ANTHROPIC_SAMPLING = (
    "not sent: Anthropic's Messages API version 2026-10-21, which anthropic>=2.0 speaks, "
    "takes no temperature, top_p or top_k (a 400 even at the default)"
)
"""Why an Anthropic call carries no ``temperature``, as a judge's warning says it."""


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


class Anthropic(Provider["AsyncAnthropic"]):
    """Claude through ``anthropic.AsyncAnthropic`` (Messages API)."""

    name = "anthropic"
    default_base_url = "https://api.anthropic.com"

    def endpoint(
        self, base_url: str | None, api_key_env: str | None, owner: str | None
    ) -> tuple[str | None, str]:
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        return url, env_key(api_key_env, ("ANTHROPIC_API_KEY",), url, owner, self.name)

    def client(self, url: str | None, key: str, timeout: float) -> AsyncAnthropic:
        from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient

        return AsyncAnthropic(
            api_key=key,
            base_url=url,
            max_retries=0,
            timeout=timeout,
            http_client=DefaultAsyncHttpxClient(timeout=timeout, follow_redirects=False),
        )

    def request(
        self,
        model: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        response_format: dict[str, Any] | None,
    ) -> tuple[str, dict[str, Any]]:
        system, turns = system_and_turns(messages)
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": params.get("max_tokens") or ANTHROPIC_MAX_TOKENS,
            "messages": [{"role": m["role"], "content": m.get("content") or ""} for m in turns],
        }
        # No temperature: see ANTHROPIC_SAMPLING.
        if system is not None:
            body["system"] = [
                {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
            ]
        schema = json_schema(response_format)
        if schema is not None:
            from anthropic import transform_schema

            body["output_config"] = {
                "format": {"type": "json_schema", "schema": transform_schema(schema)}
            }
        return "/v1/messages", body

    async def send(
        self, client: AsyncAnthropic, body: dict[str, Any], timeout: float
    ) -> tuple[dict[str, Any], Any]:
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

    async def close(self, client: AsyncAnthropic) -> None:
        await client.close()


_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


class Google(Provider["GenaiClient"]):
    """Gemini through ``google.genai.Client(...).aio`` (``generateContent``)."""

    name = "google"
    default_base_url = "https://generativelanguage.googleapis.com"
    base_url = default_base_url
    """Where calls go (set by :meth:`endpoint`): what a connection failure names."""

    def endpoint(
        self, base_url: str | None, api_key_env: str | None, owner: str | None
    ) -> tuple[str | None, str]:
        url = base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or None
        self.base_url = url or self.default_base_url
        return url, env_key(
            api_key_env, ("GEMINI_API_KEY", "GOOGLE_API_KEY"), url, owner, self.name
        )

    def client(self, url: str | None, key: str, timeout: float) -> GenaiClient:
        from google import genai
        from google.genai import types

        options = types.HttpOptions(
            base_url=url,
            timeout=int(timeout * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
            async_client_args=dict(NO_REDIRECTS),
        )  # its aiohttp's and its httpx's names
        return genai.Client(api_key=key, http_options=options)

    def request(
        self,
        model: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        response_format: dict[str, Any] | None,
    ) -> tuple[str, dict[str, Any]]:
        system, turns = system_and_turns(messages)
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
            schema = json_schema(response_format)
            if schema is not None:
                config["responseSchema"] = schema
        if config:
            body["generationConfig"] = config
        return f"/v1/models/{model}:generateContent", body

    async def send(
        self, client: GenaiClient, body: dict[str, Any], timeout: float
    ) -> tuple[dict[str, Any], Any]:
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
                raise transport_failure(exc, self.base_url, timeout) from None
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

    async def close(self, client: GenaiClient) -> None:
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


_VENDORS: dict[str, type[Provider[Any]]] = {"anthropic": Anthropic, "google": Google}


def vendor(name: str) -> Provider[Any]:
    """The provider object for ``anthropic`` or ``google``."""
    return _VENDORS[name]()
