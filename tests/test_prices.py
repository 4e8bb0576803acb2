"""Pricing a call (ci_evals.llm.prices): the suite's ``pricing`` first, then genai-prices' list,
unknown models named by the Tally, never a network fetch, the price list imported lazily."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price

from ci_evals.llm import prices
from ci_evals.llm.cost import LLMResult, Tally
from ci_evals.llm.prices import price, price_list_version

MILLION = {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000}
SUITE = {"gpt-4o-mini": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}


def listed(model: str, prompt: int, completion: int, **where: str) -> float:
    """What genai-prices itself says the call costs."""
    usage = Usage(input_tokens=prompt, output_tokens=completion)
    return float(calc_price(usage, model, **where).total_price)


def test_gpt_4o_mini_a_million_tokens_each_way_is_75_cents():
    assert price("gpt-4o-mini", MILLION) == 0.75
    assert calc_price(
        Usage(input_tokens=10**6, output_tokens=10**6), "gpt-4o-mini"
    ).total_price == (Decimal("0.75"))


@pytest.mark.parametrize(
    ("model", "base_url", "where"),
    [
        ("gpt-4o-mini", "https://api.openai.com/v1", {"provider_id": "openai"}),
        ("gpt-4o-mini-2024-07-18", None, {}),
        ("claude-3-5-haiku-latest", "https://api.anthropic.com", {"provider_id": "anthropic"}),
        (
            "gemini-2.0-flash",
            "https://generativelanguage.googleapis.com/v1beta/openai",
            {"provider_id": "google"},
        ),
        ("openai/gpt-4o-mini", "https://openrouter.ai/api/v1", {"provider_id": "openrouter"}),
        ("gpt-4.1", "http://127.0.0.1:8000/v1", {}),  # a local server: matched by name
    ],
)
def test_known_models_cost_what_genai_prices_computes(model, base_url, where):
    usage = {"prompt_tokens": 1234, "completion_tokens": 567}
    assert price(model, usage, None, base_url) == listed(model, 1234, 567, **where)


def test_a_provider_slash_model_handle_is_priced_as_that_providers_model():
    usage = {"prompt_tokens": 1000, "completion_tokens": 500}
    expected = listed("gpt-4o-mini", 1000, 500, provider_id="openai")
    assert expected == (1000 * 0.15 + 500 * 0.6) / 1e6
    assert price("openai/gpt-4o-mini", usage) == expected  # Letta's handle, no base URL
    assert price("openai/gpt-4o-mini", usage, None, "http://localhost:8283/v1") == expected
    assert price("anthropic/claude-3-5-haiku-latest", usage) == listed(
        "claude-3-5-haiku-latest", 1000, 500, provider_id="anthropic"
    )


def test_openais_embedding_models_are_priced_off_openais_own_url():
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 0}
    assert price("text-embedding-3-small", usage, None, "http://127.0.0.1:9/v1") == 0.02
    assert price("text-embedding-3-large", usage) == 0.13


def test_the_suites_pricing_comes_first_with_todays_lookup_rules():
    assert price("gpt-4o-mini", MILLION, SUITE) == 3.0  # not the list's 0.75
    assert price("openai/gpt-4o-mini", MILLION, SUITE) == 3.0  # without the provider/ prefix
    assert price("gpt-4o-mini-2024-07-18", MILLION, SUITE) == 3.0  # the longest priced prefix
    longer = {**SUITE, "gpt-4o-mini-2024": {"input_per_mtok": 5.0, "output_per_mtok": 0.0}}
    assert price("gpt-4o-mini-2024-07-18", MILLION, longer) == 5.0
    assert price("gpt-4.1", MILLION, SUITE) == listed("gpt-4.1", 10**6, 10**6)  # not in the suite
    assert price("acme-chat-1", MILLION, {"acme-chat-1": {"input_per_mtok": 0.5}}) == 0.5


@pytest.mark.parametrize(
    ("model", "base_url"),
    [
        ("acme-chat-1", None),
        ("llama3", "http://127.0.0.1:11434/v1"),
        ("letta/letta-free", None),
        ("gpt-4o-mini", "https://api.anthropic.com"),  # not Anthropic's model
        ("", None),
    ],
)
def test_an_unknown_model_has_no_price(model, base_url):
    assert price(model, {"prompt_tokens": 10, "completion_tokens": 1}, None, base_url) is None


def test_a_call_that_spent_no_tokens_costs_nothing_priced_or_not():
    zero = {"prompt_tokens": 0, "completion_tokens": 0}
    assert price("gpt-4o-mini", zero) == 0.0
    assert price("acme-chat-1", zero) == 0.0


def test_tally_names_the_models_it_has_no_price_for():
    tally = Tally()
    spent = {"prompt_tokens": 100, "completion_tokens": 10}
    tally.add(LLMResult({}, usage=spent, model="gpt-4o-mini", cost_usd=price("gpt-4o-mini", spent)))
    tally.add(LLMResult({}, usage=spent, model="zeta-1", cost_usd=None))
    tally.add(LLMResult({}, usage=spent), "acme-chat-1")  # built by hand: priced by the Tally
    tally.add(LLMResult({}, cache_hit=True, model="omega-2", cost_usd=0.0))  # cached: nothing spent
    assert tally.unpriced == {"acme-chat-1", "zeta-1"}
    assert tally.priced_usd == (100 * 0.15 + 10 * 0.6) / 1e6
    assert tally.cost_usd is None  # unknown, never a partial sum
    assert tally.metadata() == {
        "usage": {"prompt_tokens": 300, "completion_tokens": 30},
        "cache_hits": 1,
        "retries": 0,
        "unpriced": ["acme-chat-1", "zeta-1"],
    }
    assert (tally.calls, tally.cached) == (4, False)


def test_an_all_cached_tally_costs_zero_and_says_cached():
    tally = Tally()
    for _ in range(2):
        tally.add(LLMResult({}, cache_hit=True, model="acme-chat-1", cost_usd=0.0))
    assert (tally.cost_usd, tally.cached, tally.calls) == (0.0, True, 2)
    assert tally.metadata() == {
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
        "cache_hits": 2,
        "retries": 0,
        "cost_usd": 0.0,
    }


def test_the_callers_suite_pricing_wins_over_the_clients_list_price():
    tally = Tally()
    spent = {"prompt_tokens": 1_000_000, "completion_tokens": 0}
    tally.add(LLMResult({}, usage=spent, model="gpt-4o-mini", cost_usd=0.15), "gpt-4o-mini", SUITE)
    assert tally.metadata()["cost_usd"] == 1.0


def test_price_list_version_names_the_package():
    assert price_list_version() == "genai-prices 0.2.3"


def test_importing_the_llm_client_does_not_import_the_price_list(tmp_path):
    # (no memo of the list's answers yet: tests/test_price_memo.py has what one changes)
    code = (
        "import sys, ci_evals.llm.client, ci_evals.llm.cost\n"
        "assert 'genai_prices' not in sys.modules\n"
        "from ci_evals.llm.prices import price, warm\n"
        "warm(); warm()\n"
        "import ci_evals.llm.prices as p; p._warm_thread.join(30)\n"
        "assert 'genai_prices' in sys.modules\n"
        "print(price('gpt-4o-mini', {'prompt_tokens': 10**6, 'completion_tokens': 0}))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout == "0.15\n"


def test_pricing_opens_no_connection():
    code = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise OSError('no network for pricing')\n"
        "socket.socket.connect = socket.create_connection = socket.getaddrinfo = refuse\n"
        "from ci_evals.llm.prices import price\n"
        "usage = {'prompt_tokens': 10**6, 'completion_tokens': 10**6}\n"
        "print(price('gpt-4o-mini', usage, None, 'https://api.openai.com/v1'),"
        " price('claude-3-5-haiku-latest', usage, None, 'https://api.anthropic.com'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    expected = listed("claude-3-5-haiku-latest", 10**6, 10**6, provider_id="anthropic")
    assert out.stdout == f"0.75 {expected}\n"


@pytest.mark.parametrize("prompt", [1_000, 300_000])
def test_a_price_tiered_by_prompt_size_is_computed_by_the_list(prompt):
    # gemini-2.5-pro costs more per token past 200k prompt tokens: no flat rate is assumed
    usage = {"prompt_tokens": prompt, "completion_tokens": 1_000}
    assert prices._linear("gemini-2.5-pro", None) is None
    assert price("gemini-2.5-pro", usage) == listed("gemini-2.5-pro", prompt, 1_000)
    assert listed("gemini-2.5-pro", 300_000, 0) > 300_000 / 1_000 * listed(
        "gemini-2.5-pro", 1_000, 0
    )
