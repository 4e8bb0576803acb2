"""What a vendor provider is to :class:`ci_evals.llm.LLM`, and what every vendor shares.

A :class:`Provider` (:mod:`ci_evals.llm.providers`: Anthropic, Google) only knows its vendor: where
the key and base URL come from (:func:`env_key`), how to build the vendor's official SDK client
(with the SDK's own retries off), how an OpenAI-shaped chat request becomes the vendor's request
(:func:`system_and_turns`, :func:`json_schema`), and how one attempt's outcome becomes either a
chat-completions shaped response (:func:`chat_response`: ``choices[0].message.content`` and
``usage.prompt_tokens`` / ``completion_tokens``) or a :class:`~ci_evals.llm.failures.Failure`.
"""

from __future__ import annotations

import os
from typing import Any, Generic, TypeVar

from ci_evals._util.errors import ConfigError

NO_KEY = "no-key-required"

SDKClient = TypeVar("SDKClient")
"""The vendor SDK's client type a provider builds and calls through."""


class Provider(Generic[SDKClient]):
    """One vendor. ``path`` names the endpoint in messages and in the cache key."""

    name = ""
    default_base_url = ""

    def endpoint(
        self, base_url: str | None, api_key_env: str | None, owner: str | None
    ) -> tuple[str | None, str]:
        """(the base URL, None for the vendor's own; the API key) from the spec and environment."""
        raise NotImplementedError

    def client(self, url: str | None, key: str, timeout: float) -> SDKClient:
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

    async def send(
        self, client: SDKClient, body: dict[str, Any], timeout: float
    ) -> tuple[dict[str, Any], Any]:
        """One attempt: (the chat-shaped response, the response headers), or :class:`Failure`."""
        raise NotImplementedError

    async def close(self, client: SDKClient) -> None:
        raise NotImplementedError


def system_and_turns(
    messages: list[dict[str, Any]],
) -> tuple[str | None, list[dict[str, Any]]]:
    """System messages joined into one text; the other messages as (role, text) turns."""
    system = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    turns = [m for m in messages if m.get("role") != "system"]
    return ("\n\n".join(system) if system else None), turns


def json_schema(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """The JSON schema an OpenAI ``response_format`` of type ``json_schema`` names, else None."""
    if response_format and response_format.get("type") == "json_schema":
        schema: dict[str, Any] | None = (response_format.get("json_schema") or {}).get("schema")
        return schema
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


def env_key(
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
