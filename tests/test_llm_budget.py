"""The run's budget in the LLM client, and honest waits, over real HTTP (tests/fakes/openai_server).

Every attempt asks the run's :class:`Budget` before it is sent and every priced answer is charged
to it: once ``max_cost_usd`` is spent no request reaches the server and the call fails with an
LLMError of category ``budget`` (not retried, not cached), which a judge turns into an errored
grade of that category. ``waited_s`` is the time a call spent in our own queue and rate-limit
pauses, not the server's time nor a retry's backoff.
"""

from __future__ import annotations

import asyncio
import json

import pytest

import ci_evals.llm.client as llm_client
from ci_evals.config.budget import Budget
from ci_evals.config.specs import Context
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.base import build_grader
from ci_evals.llm import pool
from ci_evals.llm.client import LLM
from ci_evals.llm.cost import LLMResult, Tally
from ci_evals.llm.errors import LLMError
from tests.fakes.openai_server import EMBEDDINGS, FakeOpenAI, Fault, openai_env, openai_server  # noqa: F401

DOLLAR = {"acme-1": {"input_per_mtok": 1_000_000.0, "output_per_mtok": 0.0}}
"""One prompt token costs a dollar: every call below (one prompt token) costs exactly $1."""
SPENT = "not sent: the run's max_cost_usd $2.5 is spent ($3.0000 so far)"


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(llm_client, "BACKOFF_BASE", 0.01)


def one_token(reply: str = "ok"):
    def respond(req):
        return {"content": reply, "usage": {"prompt_tokens": 1, "completion_tokens": 0}}

    return respond


async def calls(
    llm: LLM, n: int, *, model: str = "acme-1", concurrent: bool = False
) -> list[LLMResult | LLMError]:
    """``n`` chat calls with distinct messages (no cache sharing), one after another or at once."""

    async def one(i: int) -> LLMResult | LLMError:
        try:
            return await llm.chat(model=model, messages=[{"role": "user", "content": f"q{i}"}])
        except LLMError as exc:
            return exc

    try:
        if concurrent:
            return list(await asyncio.gather(*(one(i) for i in range(n))))
        return [await one(i) for i in range(n)]
    finally:
        await llm.aclose()


def test_the_calls_up_to_the_crossing_are_sent_then_none(tmp_path):
    budget = Budget(max_cost_usd=2.5)
    with FakeOpenAI(one_token()) as server:
        llm = LLM(base_url=server.url, budget=budget, pricing=DOLLAR, cache_dir=tmp_path / "c")
        out = asyncio.run(calls(llm, 6))
        assert server.count() == 3  # $1, $2, then $3 crosses $2.5: the third was already sent
        assert [r.cost_usd for r in out[:3]] == [1.0, 1.0, 1.0]
        assert (budget.spent_usd, budget.stopped) == (3.0, SPENT.removeprefix("not sent: "))
        for err in out[3:]:
            assert isinstance(err, LLMError)
            assert (err.message, err.category, err.retries, err.status) == (
                SPENT,
                "budget",
                0,
                None,
            )
        # not cached: with budget left, the same call is sent and answered
        server.script({"content": "fresh", "usage": {"prompt_tokens": 1, "completion_tokens": 0}})
        llm = LLM(base_url=server.url, budget=Budget(), pricing=DOLLAR, cache_dir=tmp_path / "c")
        again = asyncio.run(calls(llm, 4))
        assert server.count() == 4  # q0-q2 from the cache, q3 sent
    assert [(r.cache_hit, r.content) for r in again if isinstance(r, LLMResult)] == [
        (True, "ok"),
        (True, "ok"),
        (True, "ok"),
        (False, "fresh"),
    ]


def test_a_retry_asks_the_budget_too_and_is_not_sent_once_it_is_spent():
    budget = Budget(max_cost_usd=1.0)

    def respond(req):  # while this call is in flight, another spends the budget; this one fails
        budget.charge(1.0)
        return Fault("500")

    with FakeOpenAI(respond) as server:
        (err,) = asyncio.run(calls(LLM(base_url=server.url, budget=budget, pricing=DOLLAR), 1))
        assert server.count() == 1  # the retry was not sent
    assert isinstance(err, LLMError)
    assert (err.category, err.retries) == ("budget", 1)
    assert err.message == "not sent: the run's max_cost_usd $1 is spent ($1.0000 so far)"


def test_a_call_waiting_for_a_slot_is_not_sent_when_the_budget_ran_out_meanwhile():
    budget = Budget(max_cost_usd=1.0)
    with FakeOpenAI(one_token(), latency=0.2) as server:

        async def go():
            pool.configure(max_concurrent=1)
            return await calls(
                LLM(base_url=server.url, budget=budget, pricing=DOLLAR), 3, concurrent=True
            )

        out = asyncio.run(go())
        assert server.count() == 1
    assert [type(r).__name__ for r in out] == ["LLMResult", "LLMError", "LLMError"]
    assert [getattr(r, "category", None) for r in out] == [None, "budget", "budget"]


def test_embeddings_ask_the_budget():
    budget = Budget(max_cost_usd=0.5)
    budget.charge(0.5)
    with FakeOpenAI() as server:

        async def go():
            llm = LLM(base_url=server.url, budget=budget)
            try:
                return await llm.embed("text-embedding-3-small", ["a", "b"])
            finally:
                await llm.aclose()

        with pytest.raises(LLMError) as info:
            asyncio.run(go())
        assert server.count(EMBEDDINGS) == 0
    assert info.value.category == "budget"


def test_an_answer_priced_by_the_list_is_charged(openai_env):  # noqa: F811
    openai_env.script({"content": "hi", "usage": {"prompt_tokens": 1000, "completion_tokens": 500}})
    budget = Budget(max_cost_usd=10.0)
    (result,) = asyncio.run(calls(LLM(budget=budget), 1, model="gpt-4o-mini"))
    assert result.cost_usd == budget.spent_usd == (1000 * 0.15 + 500 * 0.6) / 1e6
    tally = Tally()
    tally.add(result)
    assert tally.metadata()["cost_usd"] == result.cost_usd


def test_an_unpriced_answer_charges_nothing_and_is_named(openai_env):  # noqa: F811
    openai_env.script({"content": "hi", "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
    budget = Budget(max_cost_usd=1.0)
    (result,) = asyncio.run(calls(LLM(budget=budget), 1, model="acme-2"))
    assert (result.cost_usd, result.model, budget.spent_usd) == (None, "acme-2", 0.0)
    tally = Tally()
    tally.add(result)
    assert tally.metadata()["unpriced"] == ["acme-2"]


def judge(tmp_path, url: str, budget: Budget, kind: str = "rubric"):
    ctx = Context(tmp_path, tmp_path / "suite.yaml", pricing=DOLLAR)
    ctx.budget = budget
    spec = (
        {"kind": "rubric", "prompt": "Judge {submission}", "model": "acme-1", "base_url": url}
        if kind == "rubric"
        else {
            "kind": "score_model",
            "model": "acme-1",
            "base_url": url,
            "input": [{"role": "user", "content": "Grade {{sample.output_text}}"}],
        }
    )
    return build_grader("quality", spec, ctx)


def run_judge(grader, n: int):
    async def go():
        await grader.start()
        try:
            return [
                await grader.grade(Sample(id=i, input="q"), f"a{i}", Trajectory.from_text(f"a{i}"))
                for i in range(n)
            ]
        finally:
            await grader.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("kind", ["rubric", "score_model"])
def test_a_judge_stopped_by_the_budget_is_an_errored_grade_of_category_budget(tmp_path, kind):
    reply = json.dumps({"score": 1.0, "rationale": "fine", "result": 1.0, "steps": []})

    def respond(req):
        return {"content": reply, "usage": {"prompt_tokens": 1, "completion_tokens": 0}}

    budget = Budget(max_cost_usd=2.0)
    with FakeOpenAI(respond) as server:
        grades = run_judge(judge(tmp_path, server.url, budget, kind), 3)
        assert server.count() == 2
    assert [g.score for g in grades] == [1.0, 1.0, 0.0]
    assert [g.metadata.get("cost_usd") for g in grades[:2]] == [1.0, 1.0]
    stopped = grades[2]
    message = "not sent: the run's max_cost_usd $2 is spent ($2.0000 so far)"
    assert stopped.error == message
    assert stopped.metadata["error_category"] == "budget"
    assert stopped.metadata["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}


def test_a_retry_after_pause_is_waited_and_reported(openai_env):  # noqa: F811
    openai_env.fault("429", first=1, retry_after="0.3")
    (result,) = asyncio.run(calls(LLM(), 1, model="gpt-4o-mini"))
    assert result.throttled == 1
    assert 0.3 <= result.waited_s < 0.6
    tally = Tally()
    tally.add(result)
    assert tally.waited_s == result.waited_s


def test_a_backoff_after_a_server_error_is_not_a_wait(openai_env):  # noqa: F811
    openai_env.fault("500", first=1, retry_after="0.3")  # the server's own failure: latency
    (result,) = asyncio.run(calls(LLM(), 1, model="gpt-4o-mini"))
    assert result.retries == 1
    assert result.waited_s < 0.05


def test_a_call_queued_for_a_slot_reports_that_wait():
    with FakeOpenAI(latency=0.3) as server:

        async def go():
            pool.configure(max_concurrent=1)
            return await calls(LLM(base_url=server.url), 2, model="gpt-4o-mini", concurrent=True)

        first, second = asyncio.run(go())
    assert isinstance(first, LLMResult) and isinstance(second, LLMResult)
    assert first.waited_s < 0.05
    assert 0.3 <= second.waited_s < 0.6  # the first call's whole round trip


def test_a_failed_call_reports_its_wait_too(openai_env):  # noqa: F811
    openai_env.fault("429", first=1, retry_after="0.3")
    openai_env.fault("400", first=1)
    (err,) = asyncio.run(calls(LLM(), 1, model="gpt-4o-mini"))
    assert isinstance(err, LLMError) and err.status == 400
    assert 0.3 <= err.waited_s < 0.6
    tally = Tally()
    tally.add_error(err)
    assert tally.waited_s == err.waited_s
