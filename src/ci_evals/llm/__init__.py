"""Calling LLMs: the package's public surface (the code lives in the modules named below).

* :mod:`~ci_evals.llm.client`: :class:`LLM`, the one wrapper every judge, target and embedding
  metric calls models through (endpoint, retries, timeouts, cache, usage);
  :mod:`~ci_evals.llm.errors`: :class:`LLMError`; :mod:`~ci_evals.llm.openai_api`: the OpenAI
  endpoint and key from the environment, the reasoning models' temperature.
* :mod:`~ci_evals.llm.transport`: one ``POST`` through the openai SDK's client, cheapest path first;
  :mod:`~ci_evals.llm.failures`: how one attempt fails, on every path.
* :mod:`~ci_evals.llm.providers` (and :mod:`~ci_evals.llm.provider_base`): the Anthropic and
  Google (Gemini) vendor layer.
* :mod:`~ci_evals.llm.scheduler`, :mod:`~ci_evals.llm.pace` and :mod:`~ci_evals.llm.limits`: one
  scheduler per endpoint (adaptive concurrency, pacing, one pause per 429, the breaker), its
  buckets, and the rate limits it paces by.
* :mod:`~ci_evals.llm.pool`: the shared clients and schedulers of one event loop, and its shared
  in-flight calls; the run's settings.
* :mod:`~ci_evals.llm.cache`: the response cache on disk.
* :mod:`~ci_evals.llm.cost`: what a call returned and cost (:class:`LLMResult`, :class:`Tally`);
  :mod:`~ci_evals.llm.prices`: what one call cost (the suite's ``pricing``, then genai-prices).

Code inside ci-evals imports from those modules; these names are kept for users' own code.
"""

from ci_evals.llm.cache import CACHE_VERSION, ResponseCache, cache_key
from ci_evals.llm.client import DEFAULT_BASE_URL, LLM, retry_after_seconds
from ci_evals.llm.cost import LLMResult, Tally
from ci_evals.llm.errors import LLMError, shown_url
from ci_evals.llm.openai_api import (
    NO_KEY,
    effective_temperature,
    is_reasoning_model,
    resolve_endpoint,
)
from ci_evals.llm.pool import EngineConfig, configure, endpoint_reports, throttling_note
from ci_evals.llm.prices import price, price_list_version
from ci_evals.llm.transport import MAX_RESPONSE_BYTES, unusable

__all__ = [
    "CACHE_VERSION",
    "DEFAULT_BASE_URL",
    "LLM",
    "MAX_RESPONSE_BYTES",
    "NO_KEY",
    "EngineConfig",
    "LLMError",
    "LLMResult",
    "ResponseCache",
    "Tally",
    "cache_key",
    "configure",
    "effective_temperature",
    "endpoint_reports",
    "is_reasoning_model",
    "price",
    "price_list_version",
    "resolve_endpoint",
    "retry_after_seconds",
    "shown_url",
    "throttling_note",
    "unusable",
]
