"""What the Letta target reports about a sample's cost and speed (the server's ``step_count``,
tokens, cost at the agent's model's price) and the budgets that stop it (``max_steps`` sent to the
server, ``max_tokens``, the run's ``max_cost_usd``); a Letta judge's cost. Against the fake Letta
server; the last tests (``-m letta_server``) on a real Letta server.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from ci_evals.cli.app import main
from ci_evals.config.budget import Budget, BudgetExceeded
from ci_evals.config.specs import Context
from ci_evals.core.sample import Sample
from ci_evals.graders.letta_judge import LettaJudgeGrader, LettaJudgeSpec
from ci_evals.llm.prices import price
from ci_evals.targets.letta import LettaTarget, LettaTargetSpec
from tests.fakes.letta_server import (  # noqa: F401 - letta_fake_fixture provides `letta_fake`
    SUBMIT_GRADE,
    FakeLetta,
    agent_file,
    letta_fake_fixture,
    write_agent_file,
)
from tests.test_target_budgets import PRICING, run_target

LOOKUP = '''def lookup_capital(country: str) -> str:
    """Look up a capital."""
    return {"France": "Paris"}.get(country, "unknown")
'''


# -- the Letta target and judge against the fake server -------------------------------------------


def letta_target(
    fake: FakeLetta, tmp_path: Path, budget: Budget, *, tools=(), **raw
) -> LettaTarget:
    af = write_agent_file(tmp_path / "agent.af", agent_file("capital-agent", tools=list(tools)))
    spec = LettaTargetSpec.model_validate(
        {"kind": "agent", "base_url": fake.url, "agent_file": str(af), **raw}
    )
    ctx = Context(tmp_path, pricing=PRICING)
    ctx.budget = budget
    return LettaTarget(spec, ctx)


def spy(target: LettaTarget, sent: list[dict], strip_usage: bool = False) -> None:
    """Record the keyword arguments of every messages.create (and drop the answer's usage)."""
    messages = target.client.agents.messages
    create = messages.create

    async def recorded(agent_id, **kw):
        sent.append({k: v for k, v in kw.items() if k != "messages"})
        resp = await create(agent_id, **kw)
        if strip_usage:
            resp.usage = None
        return resp

    messages.create = recorded


def test_letta_steps_tokens_and_cost_are_summed_and_charged(letta_fake, tmp_path):
    budget = Budget(max_steps=10)
    target = letta_target(letta_fake, tmp_path, budget, tools=[LOOKUP])
    sent: list[dict] = []
    spy(target, sent)
    traj = run_target(target, Sample(id=1, input=["France", "Spain"]))
    # each message: a tool call step and an answer step, 10 + 5 tokens a step
    assert traj.usage.to_dict() == {"prompt_tokens": 40, "completion_tokens": 20}
    cost = (40 * 1.0 + 20 * 2.0) / 1e6
    assert traj.metadata["steps"] == 4
    assert traj.metadata["cost_usd"] == pytest.approx(cost, abs=1e-15)
    assert budget.spent_usd == pytest.approx(cost, abs=1e-15)
    assert sent == [{"max_steps": 10}, {"max_steps": 8}]  # the steps the sample has left


def test_letta_without_step_counts_reports_no_steps(letta_fake, tmp_path):
    target = letta_target(letta_fake, tmp_path, Budget())
    sent: list[dict] = []
    spy(target, sent, strip_usage=True)
    traj = run_target(target, Sample(id=1, input="hi"))
    assert sent == [{}]  # no max_steps: none sent
    assert "steps" not in traj.metadata and "unpriced" not in traj.metadata
    assert traj.metadata["stop_reasons"] == ["end_turn"]


def test_a_letta_run_ended_at_max_steps_is_a_budget_stop_never_retried(letta_fake, tmp_path):
    letta_fake.stop_reason = "max_steps"
    target = letta_target(letta_fake, tmp_path, Budget(max_steps=1), max_retries=2)
    with pytest.raises(BudgetExceeded) as info:
        run_target(target, Sample(id=1, input="hi"))
    exc = info.value
    assert str(exc) == "stopped after 1 steps: past max_steps 1"
    assert exc.usage == {"prompt_tokens": 10, "completion_tokens": 5}
    assert exc.cost_usd == pytest.approx(20 / 1e6, abs=1e-15)
    assert letta_fake.count("POST", r"/v1/agents/[^/]+/messages") == 1
    assert letta_fake.live() == []  # its agent deleted


def test_letta_max_tokens_and_the_runs_budget_stop_the_sample(letta_fake, tmp_path):
    with pytest.raises(BudgetExceeded, match=r"^stopped after 15 tokens: past max_tokens 10$"):
        run_target(
            letta_target(letta_fake, tmp_path, Budget(max_tokens=10)), Sample(id=1, input="hi")
        )
    spent = Budget(max_cost_usd=0.5)
    spent.charge(1.0)
    with pytest.raises(BudgetExceeded, match=r"^not sent: the run's max_cost_usd \$0.5 is spent"):
        run_target(letta_target(letta_fake, tmp_path, spent), Sample(id=2, input="hi"))
    assert letta_fake.sent == [(letta_fake.created[0], "hi")]  # the second never reached the agent
    assert letta_fake.live() == []


def test_a_letta_judges_cost_is_in_its_grade_and_charged(letta_fake, tmp_path):
    write_agent_file(tmp_path / "judge.af", agent_file("judge", tools=[SUBMIT_GRADE]))
    spec = LettaJudgeSpec.model_validate(
        {
            "kind": "rubric",
            "prompt": "Grade it. score=1",
            "agent_file": "judge.af",
            "base_url": letta_fake.url,
            "judge_repeats": 2,
        }
    )
    ctx = Context(tmp_path, pricing=PRICING)
    judge = LettaJudgeGrader("j", spec, ctx)

    async def go():
        await judge.start()
        try:
            return await judge.grade(Sample(id=1, input="q"), "a", None)  # type: ignore[arg-type]
        finally:
            await judge.aclose()

    g = asyncio.run(go())
    # each judge: a tool call step and a final step, 10 + 5 tokens a step
    assert g.error is None and g.metadata["usage"] == {"prompt_tokens": 40, "completion_tokens": 20}
    assert g.metadata["cost_usd"] == pytest.approx(80 / 1e6, abs=1e-15)
    assert ctx.budget.spent_usd == pytest.approx(80 / 1e6, abs=1e-15)
    ctx.budget = Budget(max_cost_usd=0.1)
    ctx.budget.charge(0.1)
    g = asyncio.run(go())
    assert g.error == "not sent: the run's max_cost_usd $0.1 is spent ($0.1000 so far)"
    assert letta_fake.live() == []


# -- on a real Letta server (pytest -m letta_server) ---------------------------------------------

REPO = Path(__file__).resolve().parent.parent
CAPITAL = REPO / "examples" / "letta" / "agent-judge" / "capital-agent.af"


def capital_suite(tmp_path: Path, **extra) -> Path:
    (tmp_path / "data.jsonl").write_text(
        json.dumps({"id": "fr", "input": "What is the capital of France?", "ground_truth": "Paris"})
        + "\n"
    )
    model = os.environ.get("LETTA_TEST_MODEL", "openai-proxy/gpt-4o-mini")
    suite = {
        "name": "capital",
        "dataset": "data.jsonl",
        "target": {"kind": "agent", "agent_file": str(CAPITAL), "model_handles": [model]},
        "graders": {"c": {"kind": "tool", "function": "contains"}},
        **extra,
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(suite))
    return tmp_path / "suite.yaml"


def real_run(tmp_path: Path, **extra) -> tuple[int, dict]:
    if not os.environ.get("LETTA_BASE_URL"):
        pytest.fail(
            'no Letta server: run scripts/letta-server.sh start && eval "$(scripts/letta-server.sh env)"'
        )
    out = tmp_path / "out"
    code = main(
        ["run", str(capital_suite(tmp_path, **extra)), "--output", str(out), "-q", "--no-cache"]
    )
    (rec,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return code, rec


@pytest.mark.letta_server
def test_a_real_letta_agent_records_the_servers_steps_and_tokens(tmp_path):
    code, rec = real_run(tmp_path)
    assert code == 0 and rec["error"] is None
    assert rec["steps"] == 2  # the tool call, then the answer
    assert rec["usage"]["prompt_tokens"] > 0 and rec["usage"]["completion_tokens"] > 0
    model = os.environ.get("LETTA_TEST_MODEL", "openai-proxy/gpt-4o-mini")
    assert rec["target"]["cost_usd"] == pytest.approx(price(model, rec["usage"]), rel=1e-12)
    assert rec["target"]["cost_usd"] > 0  # gpt-4o-mini is on the list


@pytest.mark.letta_server
def test_a_real_letta_agent_past_max_steps_stops_with_the_budget_reason(tmp_path):
    code, rec = real_run(tmp_path, max_steps=1)
    assert code == 1
    assert rec["error"] == {
        "category": "budget",
        "message": "stopped after 1 steps: past max_steps 1",
    }
    # the step it took is spent: on the failed line, priced by the list at the agent's model
    assert rec["usage"]["prompt_tokens"] > 0 and rec["usage"]["completion_tokens"] > 0
    model = os.environ.get("LETTA_TEST_MODEL", "openai-proxy/gpt-4o-mini")
    assert rec["target"] == {"cost_usd": pytest.approx(price(model, rec["usage"]), rel=1e-12)}
