"""What targets report about a sample's cost and speed (steps, queued time, cached answers, cost or
unpriced models) and the budgets that stop a runaway sample or run (ci_evals.config.budget).

End to end through ``cli.main`` with the fake OpenAI server, a command agent and recorded outputs;
the Letta target and judge in tests/test_letta_budgets.py.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import ci_evals.llm.client as llm_client
from ci_evals.cli.app import main
from ci_evals.config.budget import Budget, BudgetExceeded
from ci_evals.config.specs import Context, validate_model
from ci_evals.core.sample import Sample
from ci_evals.llm.errors import LLMError
from ci_evals.targets.http import HttpSpec, HttpTarget
from ci_evals.targets.model import ModelTarget, ModelTargetSpec
from tests.fakes.letta_server import (  # noqa: F401 - letta_fake_fixture provides `letta_fake`
    SUBMIT_GRADE,
    FakeLetta,
    agent_file,
    letta_fake_fixture,
    write_agent_file,
)
from tests.fakes.openai_server import FakeOpenAI

PRICING = {"gpt-4o-mini": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(llm_client, "BACKOFF_BASE", 0.01)


@pytest.fixture
def llm(monkeypatch) -> Iterator[FakeOpenAI]:
    """The fake OpenAI server, with OPENAI_BASE_URL and OPENAI_API_KEY pointing at it."""
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-budget-key-123456")
        yield server


def model_suite(sd, data: list[dict], model: str = "gpt-4o-mini", **extra) -> None:
    sd.write("dataset.jsonl", data)
    sd.suite(
        {
            "name": "m",
            "dataset": "dataset.jsonl",
            "target": {"kind": "model", "model": model},
            "graders": {"c": {"kind": "tool", "function": "contains"}},
            **extra,
        }
    )


# -- the model target, end to end ------------------------------------------------------------


def test_model_target_records_its_steps_and_priced_cost(sd, llm):
    llm.script("four five", "six")
    model_suite(
        sd, [{"id": 1, "input": ["one two", "three"], "ground_truth": "six"}], pricing=PRICING
    )
    assert sd.run() == 0
    (rec,) = sd.results()
    # call 1: 2 prompt words, 2 completion; call 2: 5 prompt words (the history), 1 completion
    assert rec["usage"] == {"prompt_tokens": 7, "completion_tokens": 3}
    assert (rec["steps"], rec["tool_calls"]) == (2, 0)
    assert rec["target"]["cost_usd"] == pytest.approx((7 * 1.0 + 3 * 2.0) / 1e6, abs=1e-15)
    assert "unpriced" not in rec["target"] and "cached" not in rec["target"]
    assert rec["latency_s"] is not None and rec["latency_s"] > 0
    assert "queued_s" not in rec  # nothing waited


def test_an_unpriced_model_is_named_and_has_no_cost(sd, llm):
    llm.script("six")
    model_suite(sd, [{"id": 1, "input": "one two", "ground_truth": "six"}], model="acme-chat-1")
    assert sd.run() == 0
    (rec,) = sd.results()
    assert rec["target"]["unpriced"] == ["acme-chat-1"]
    assert "cost_usd" not in rec["target"]
    assert rec["steps"] == 1


def test_an_answer_from_the_llm_cache_is_marked_cached(sd, llm):
    model_suite(
        sd, [{"id": 1, "input": "one two", "ground_truth": "x"}], pricing=PRICING, cache="cache"
    )
    args = ["run", str(sd.root / "suite.yaml"), "-q", "--output"]
    main([*args, str(sd.root / "first")])
    main([*args, str(sd.root / "second")])
    (first,) = sd.results("first")
    (second,) = sd.results("second")
    assert llm.count() == 1
    assert first["latency_s"] > 0 and second["latency_s"] is None  # nothing measured
    assert "cached" not in second["target"]
    assert (first["cache_hits"] if "cache_hits" in first else 0, second["cache_hits"]) == (0, 1)
    assert second["target"]["cost_usd"] == 0.0  # a cached answer spends nothing
    assert second["steps"] == 1


def test_max_tokens_stops_a_sample_with_the_budget_reason(sd, llm):
    llm.script("a b c d", "fine")
    model_suite(
        sd,
        [{"id": 1, "input": "one two", "ground_truth": "x"}, {"id": 2, "input": "hi"}],
        max_tokens=5,
        max_concurrent=1,
        pricing=PRICING,
    )
    assert sd.run() == 1
    first, second = sorted(sd.results(), key=lambda r: r["sample_id"])
    assert first["error"] == {
        "category": "budget",
        "message": "stopped after 6 tokens: past max_tokens 5",
    }
    assert (
        first["grades"]["c"]["error"] == "budget error: stopped after 6 tokens: past max_tokens 5"
    )
    # what the stopped sample spent is on its line, so the run's cost includes it
    assert first["usage"] == {"prompt_tokens": 2, "completion_tokens": 4}
    assert first["target"]["cost_usd"] == pytest.approx((2 * 1.0 + 4 * 2.0) / 1e6, abs=1e-15)
    summary = sd.summary()
    assert summary["cost_speed"]["budget"]["stopped_samples"] == 1
    assert second["error"] is None and second["usage"] == {
        "prompt_tokens": 1,
        "completion_tokens": 1,
    }


def test_max_steps_stops_before_the_call_past_it(sd, llm):
    llm.script("one", "two")
    model_suite(
        sd, [{"id": 1, "input": ["a", "b", "c"], "ground_truth": "x"}], "acme-chat-1", max_steps=2
    )
    assert sd.run() == 1
    (rec,) = sd.results()
    assert rec["error"] == {
        "category": "budget",
        "message": "stopped after 2 steps: max_steps 2 spent before turn 3",
    }
    assert llm.count() == 2
    assert rec["usage"] == {"prompt_tokens": 4, "completion_tokens": 2}  # a, then a one b
    assert rec["target"] == {"unpriced": ["acme-chat-1"]}


# -- the model target: what a stopped sample spent --------------------------------------------


def model_target(tmp_path: Path, budget: Budget, **raw) -> ModelTarget:
    ctx = Context(tmp_path, tmp_path / "suite.yaml", pricing=raw.pop("pricing", None))
    ctx.budget = budget
    spec = validate_model(ModelTargetSpec, {"kind": "model", "model": "gpt-4o-mini", **raw}, "t")
    return ModelTarget(spec, ctx)


def run_target(target: Any, sample: Sample) -> Any:
    async def go():
        await target.start()
        try:
            return await target.run(sample)
        finally:
            await target.aclose()

    return asyncio.run(go())


def test_a_stopped_sample_tells_what_its_calls_spent(llm, tmp_path):
    llm.script("a b", "c d e")
    target = model_target(tmp_path, Budget(max_tokens=8), pricing=PRICING)
    with pytest.raises(BudgetExceeded) as info:
        run_target(target, Sample(id=1, input=["x", "y"]))
    exc = info.value
    # call 1: 1 + 2 tokens; call 2: 4 prompt words (x, a b, y) + 3 = 10 in all
    assert (str(exc), exc.category) == ("stopped after 10 tokens: past max_tokens 8", "budget")
    assert exc.usage == {"prompt_tokens": 5, "completion_tokens": 5}
    assert exc.cost_usd == pytest.approx((5 * 1.0 + 5 * 2.0) / 1e6, abs=1e-15)
    assert not hasattr(exc, "unpriced")


def test_the_runs_spent_budget_sends_nothing(llm, tmp_path):
    budget = Budget(max_cost_usd=0.01)
    budget.charge(0.02)
    with pytest.raises(BudgetExceeded) as info:
        run_target(model_target(tmp_path, budget), Sample(id=1, input="x"))
    assert str(info.value) == "not sent: the run's max_cost_usd $0.01 is spent ($0.0200 so far)"
    assert llm.count() == 0 and not hasattr(info.value, "usage")


def test_a_clients_budget_refusal_is_a_budget_stop_not_a_failed_call(llm, tmp_path):
    target = model_target(tmp_path, Budget())

    async def refuse(**kw):
        exc = LLMError("not sent: the run's max_cost_usd $1 is spent ($1.0000 so far)")
        exc.category = "budget"  # type: ignore[attr-defined]
        raise exc

    target.llm.chat = refuse  # type: ignore[method-assign]
    with pytest.raises(BudgetExceeded) as info:
        run_target(target, Sample(id=1, input="x"))
    assert str(info.value) == "not sent: the run's max_cost_usd $1 is spent ($1.0000 so far)"


# -- command, HTTP and recorded answers that report their cost ------------------------------------


def command_suite(sd, answer: dict, **extra) -> None:
    sd.write("agent.py", f"import json, sys\nsys.stdin.read()\nprint(json.dumps({answer!r}))\n")
    sd.write("dataset.jsonl", [{"id": i, "input": "q", "ground_truth": "ok"} for i in (1, 2)])
    sd.suite(
        {
            "name": "c",
            "dataset": "dataset.jsonl",
            "target": {"kind": "command", "command": [sys.executable, "agent.py"]},
            "graders": {"c": {"kind": "tool", "function": "contains"}},
            "max_concurrent": 1,
            **extra,
        }
    )


def test_a_command_reports_its_usage_steps_and_cost(sd):
    answer = {
        "output": "ok",
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
        "steps": 4,
        "cost_usd": 0.25,
    }
    command_suite(sd, answer)
    assert sd.run() == 0
    for rec in sd.results():
        assert rec["usage"] == {"prompt_tokens": 12, "completion_tokens": 3}
        assert (rec["steps"], rec["target"]["cost_usd"]) == (4, 0.25)


def test_a_commands_reported_cost_spends_the_runs_budget(sd):
    command_suite(sd, {"output": "ok", "cost_usd": 0.02}, max_cost_usd=0.01)
    assert sd.run() == 1
    first, second = sorted(sd.results(), key=lambda r: r["sample_id"])
    assert first["error"] is None
    assert second["error"] == {
        "category": "budget",
        "message": "not sent: the run's max_cost_usd $0.01 is spent ($0.0200 so far)",
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"steps": "3"}, "'steps' must be a whole number >= 0, got \"3\""),
        ({"steps": -1}, "'steps' must be a whole number >= 0, got -1"),
        ({"cost_usd": True}, "'cost_usd' must be a number >= 0, got true"),
        ({"cost_usd": -0.5}, "'cost_usd' must be a number >= 0, got -0.5"),
        (
            {"usage": [1, 2]},
            "'usage' must be an object {prompt_tokens, completion_tokens}, got [1, 2]",
        ),
        (
            {"usage": {"prompt_tokens": 1.5}},
            "'usage.prompt_tokens' must be a whole number >= 0, got 1.5",
        ),
    ],
)
def test_a_malformed_reported_figure_is_the_samples_error(sd, extra, message):
    command_suite(sd, {"output": "ok", **extra})
    assert sd.run() == 1
    assert {r["error"]["message"] for r in sd.results()} == {f"the answer's {message}"}


def test_an_http_agent_reports_its_usage_steps_and_cost(tmp_path):
    answer = {"output": "ok", "usage": {"prompt_tokens": 2}, "steps": 1, "cost_usd": 0.5}
    ctx = Context(tmp_path, tmp_path / "suite.yaml")
    target = HttpTarget(HttpSpec(kind="http", url="http://agent.test/run"), ctx)

    async def go():
        target.client = httpx.AsyncClient(
            transport=httpx.MockTransport(lambda req: httpx.Response(200, json=answer))
        )
        try:
            return await target.run(Sample(id=1, input="q"))
        finally:
            await target.aclose()

    traj = asyncio.run(go())
    assert traj.usage.to_dict() == {"prompt_tokens": 2, "completion_tokens": 0}
    assert traj.metadata == {"steps": 1, "cost_usd": 0.5}
    assert ctx.budget.spent_usd == 0.5


def test_recorded_answers_carry_their_usage_steps_cost_and_latency(sd):
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "ok"}])
    recorded = {"usage": {"prompt_tokens": 9, "completion_tokens": 4}, "steps": 3}
    sd.write(
        "outputs.jsonl", [{"id": 1, "output": "ok", **recorded, "cost_usd": 0.1, "latency_s": 2.5}]
    )
    sd.suite(
        {
            "name": "r",
            "dataset": "dataset.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {"c": {"kind": "tool", "function": "contains"}},
            "max_cost_usd": 0.05,  # replaying spends nothing: never stopped
        }
    )
    assert sd.run() == 0
    (rec,) = sd.results()
    assert rec["usage"] == recorded["usage"]
    assert (rec["steps"], rec["latency_s"], rec["target"]) == (3, 2.5, {"cost_usd": 0.1})


def test_a_malformed_recorded_latency_names_the_line(sd):
    sd.write("dataset.jsonl", [{"id": 1, "input": "q"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "ok", "latency_s": "fast"}])
    sd.suite(
        {
            "name": "r",
            "dataset": "dataset.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {"c": {"kind": "tool", "function": "contains"}},
        }
    )
    assert sd.run() == 1
    (rec,) = sd.results()
    assert (
        rec["error"]["message"]
        == "outputs.jsonl:1: 'latency_s' must be a number >= 0, got \"fast\""
    )
