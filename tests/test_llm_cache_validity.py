"""The LLM cache serves only usable entries and stores only what it would return (issue 15 item 17)."""

from __future__ import annotations

import json

import pytest

import ci_evals.llm.client as llm_client
from tests.fakes.openai_server import openai_env, openai_server  # noqa: F401
from tests.test_llm_client import chat, chat_error


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(llm_client, "BACKOFF_BASE", 0.01)


@pytest.mark.parametrize(
    "entry", [{}, {"choices": []}, {"choices": [None]}, {"choices": [{"text": "x"}]}, []]
)
def test_an_unusable_cache_entry_is_a_miss_and_is_overwritten(openai_env, tmp_path, entry):  # noqa: F811
    first = chat(openai_env, cache_dir=tmp_path)
    (path,) = tmp_path.rglob("*.json")
    path.write_text(json.dumps(entry))
    again = chat(openai_env, cache_dir=tmp_path)
    assert (again.cache_hit, again.content, openai_env.count()) == (False, first.content, 2)
    assert json.loads(path.read_text()) == again.data
    assert chat(openai_env, cache_dir=tmp_path).cache_hit is True


def test_a_response_without_choices_is_retried_and_never_cached(openai_env, tmp_path):  # noqa: F811
    openai_env.script({"id": "c1", "choices": []})
    result = chat(openai_env, cache_dir=tmp_path, max_retries=2)
    assert (result.retries, result.cache_hit, openai_env.count()) == (1, False, 2)
    assert result.content != ""
    (path,) = tmp_path.rglob("*.json")
    assert json.loads(path.read_text()) == result.data


def test_a_response_without_choices_fails_for_good_and_leaves_no_entry(openai_env, tmp_path):  # noqa: F811
    openai_env.script({"id": "c1", "choices": []})
    err = chat_error(openai_env, cache_dir=tmp_path, max_retries=0)
    assert (
        err.message == f"{openai_env.url}/chat/completions: the response has no choices[0].message"
    )
    assert list(tmp_path.rglob("*.json")) == []
