"""What ci-evals knows of the OpenAI API itself (``provider: openai``, any compatible server).

* Where a call goes: :func:`resolve_endpoint` reads ``base_url`` / ``api_key_env`` from the spec,
  else ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. A custom base URL needs no key (local servers:
  vLLM, Ollama, LiteLLM get the placeholder :data:`NO_KEY`); the real OpenAI API does.
* Which models take only temperature 1 (:func:`is_reasoning_model`, :func:`effective_temperature`).

The other vendors' counterparts live with their provider (:mod:`ci_evals.llm.providers`).
"""

from __future__ import annotations

import os

from ci_evals._util.errors import ConfigError

NO_KEY = "sk-no-key-required"


def is_reasoning_model(model: str) -> bool:
    """o1/o3/o4 and gpt-5 models (a ``provider/`` prefix is ignored) accept only temperature 1."""
    name = model.lower().rsplit("/", 1)[-1]
    return name.startswith(("o1", "o3", "o4")) or "gpt-5" in name


def effective_temperature(model: str, temperature: float | None) -> float | None:
    """The temperature to send: 1.0 for reasoning models, else as given."""
    if temperature is not None and is_reasoning_model(model):
        return 1.0
    return temperature


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
