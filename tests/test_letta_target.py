"""The Letta agent target, through the real letta-client against the local fake Letta server."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from ci_evals._util import retry
from ci_evals._util.errors import ConfigError, SampleError
from ci_evals.config.specs import Context
from ci_evals.core.sample import Sample
from ci_evals.letta import retries as letta_retries
from ci_evals.letta.client import base_url_of
from ci_evals.letta.messages import to_turn
from ci_evals.reports.letta_agents import comment_lines, console_lines
from ci_evals.reports.text import escape_md
from ci_evals.targets.letta import LettaTarget, LettaTargetSpec
from tests.fakes.backoff import watch_letta_backoff
from tests.fakes.letta_server import (  # noqa: F401 - letta_fake_fixture provides `letta_fake`
    FakeLetta,
    agent_file,
    assistant,
    letta_fake_fixture,
    tool_call,
    tool_return,
    write_agent_file,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "letta"
LOOKUP = """def lookup_capital(country: str) -> str:
    return {"France": "Paris"}.get(country, "unknown")
"""


@pytest.fixture(autouse=True)
def _no_import_backoff(monkeypatch):
    """Retried imports wait 0 s here (the backoff itself is tested in test_letta_agents.py)."""
    monkeypatch.setattr(letta_retries, "IMPORT_BACKOFF", 0.0)


def make(fake: FakeLetta, tmp_path: Path, **raw) -> LettaTarget:
    if not any(k in raw for k in ("agent_file", "agent_id", "agent_script")):
        raw["agent_file"] = str(
            write_agent_file(tmp_path / "echo.af", agent_file(blocks={"human": ""}))
        )
    spec = LettaTargetSpec.model_validate({"kind": "agent", "base_url": fake.url, **raw})
    return LettaTarget(spec, Context(tmp_path))


def run(target: LettaTarget, *samples: Sample, **kw):
    async def go():
        await target.start()
        try:
            return [await target.run(s, **kw) for s in samples]
        finally:
            await target.aclose()

    return asyncio.run(go())


def sample(text, i=0, **kw) -> Sample:
    return Sample(id=i, input=text, **kw)


def dicts(turn) -> list[dict]:
    return [m.to_dict() for m in turn]


# -- conversations --------------------------------------------------------------------------------


def test_single_turn_maps_reasoning_and_assistant(letta_fake, tmp_path):
    [traj] = run(make(letta_fake, tmp_path), sample("hello"))
    assert [dicts(t) for t in traj.turns] == [
        [
            {"role": "user", "content": "hello"},
            {"role": "reasoning", "content": "The user said: hello"},
            {"role": "assistant", "content": "ECHO: hello"},
        ]
    ]
    assert traj.usage.to_dict() == {"prompt_tokens": 10, "completion_tokens": 5}
    assert traj.metadata == {
        "agent_id": letta_fake.created[0],
        "model": "openai/gpt-4o-mini",
        "stop_reasons": ["end_turn"],
        "steps": 1,
        "cost_usd": pytest.approx((10 * 0.15 + 5 * 0.6) / 1e6, rel=1e-12),  # genai-prices
    }


def test_multi_turn_sends_one_message_per_turn_to_one_agent(letta_fake, tmp_path):
    [traj] = run(make(letta_fake, tmp_path), sample(["hi", "and again"]))
    agent = letta_fake.created[0]
    assert letta_fake.sent == [(agent, "hi"), (agent, "and again")]
    assert [[m.content for m in t if m.role == "assistant"] for t in traj.turns] == [
        ["ECHO: hi"],
        ["ECHO: and again"],
    ]
    assert traj.usage.to_dict() == {"prompt_tokens": 20, "completion_tokens": 10}
    assert traj.metadata["stop_reasons"] == ["end_turn", "end_turn"]


def test_tool_call_and_return_become_assistant_calls_and_tool_messages(letta_fake, tmp_path):
    af = write_agent_file(tmp_path / "cap.af", agent_file("capitals", tools=[LOOKUP]))
    [traj] = run(make(letta_fake, tmp_path, agent_file=str(af)), sample("Capital of France?"))
    turn = traj.turns[0]
    call_id = turn[2].tool_calls[0].id
    assert dicts(turn) == [
        {"role": "user", "content": "Capital of France?"},
        {"role": "reasoning", "content": "I should call lookup_capital."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": call_id, "name": "lookup_capital", "arguments": '{"country": "France"}'}
            ],
        },
        {"role": "tool", "content": "Paris", "tool_call_id": call_id, "name": "lookup_capital"},
        {"role": "assistant", "content": "Paris"},
    ]
    assert traj.usage.to_dict() == {"prompt_tokens": 20, "completion_tokens": 10}


def test_tool_calls_of_the_same_step_join_its_assistant_message(letta_fake, tmp_path):
    def parallel(fake, agent, text):
        a, b = tool_call("f", {"x": 1}, "c1"), tool_call("g", {}, "c2")
        both = dict(a, tool_calls=a["tool_calls"] + b["tool_calls"])
        ret = tool_return("c1", "one")
        ret["tool_returns"] = (
            tool_return("c1", "one")["tool_returns"] + tool_return("c2", "two")["tool_returns"]
        )
        return [assistant("Let me check."), both, ret, assistant("Done.")]

    letta_fake.behaviours["echo-agent"] = parallel
    [traj] = run(make(letta_fake, tmp_path), sample("go"))
    assert dicts(traj.turns[0]) == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {"id": "c1", "name": "f", "arguments": '{"x": 1}'},
                {"id": "c2", "name": "g", "arguments": "{}"},
            ],
        },
        {"role": "tool", "content": "one", "tool_call_id": "c1", "name": "f"},
        {"role": "tool", "content": "two", "tool_call_id": "c2", "name": "g"},
        {"role": "assistant", "content": "Done."},
    ]


def test_message_mapping_keeps_other_user_and_system_messages_and_drops_the_echo():
    msgs = [
        {"message_type": "user_message", "content": "hi"},
        {"message_type": "system_message", "content": "summary"},
        {"message_type": "user_message", "content": [{"type": "text", "text": "heartbeat"}]},
        {"message_type": "hidden_reasoning_message", "state": "omitted", "hidden_reasoning": None},
        {
            "message_type": "tool_call_message",
            "tool_call": {"name": "t", "arguments": "{}", "tool_call_id": "x"},
        },
        {"message_type": "event_message", "event_type": "compaction"},
    ]
    assert dicts(to_turn(msgs, "hi")) == [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "summary"},
        {"role": "user", "content": "heartbeat"},
        {"role": "reasoning", "content": ""},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "x", "name": "t", "arguments": "{}"}],
        },
    ]


def test_memory_blocks_are_read_only_when_needed(letta_fake, tmp_path):
    [without] = run(make(letta_fake, tmp_path), sample("a"))
    assert without.memory_blocks == {}
    assert letta_fake.count("GET", r"/v1/agents/.*/core-memory/blocks") == 0
    [with_memory] = run(make(letta_fake, tmp_path), sample(["a", "b"]), need_memory=True)
    assert with_memory.memory_blocks == {"human": "- a\n- b\n"}


def test_more_memory_blocks_than_an_agent_has_fail_the_sample(letta_fake, tmp_path, monkeypatch):
    from ci_evals.letta import messages

    monkeypatch.setattr(messages, "MAX_MEMORY_BLOCKS", 1)
    two = write_agent_file(tmp_path / "two.af", agent_file(blocks={"human": "", "persona": ""}))
    target = make(letta_fake, tmp_path, agent_file=str(two), max_retries=0)
    with pytest.raises(SampleError) as err:
        run(target, sample("hi"), need_memory=True)
    assert str(err.value) == (
        "Letta agent run failed: the Letta server listed over 1 memory blocks for one agent"
    )
    assert letta_fake.live() == []


def test_agent_file_is_imported_fresh_per_sample(letta_fake, tmp_path):
    trajs = run(
        make(letta_fake, tmp_path),
        sample("one", 0),
        sample("two", 1),
        sample("three", 2),
        need_memory=True,
    )
    assert len(letta_fake.created) == 3
    assert [t.memory_blocks for t in trajs] == [
        {"human": "- one\n"},
        {"human": "- two\n"},
        {"human": "- three\n"},
    ]
    assert [a for a, _ in letta_fake.sent] == letta_fake.created
    assert letta_fake.live() == []
    assert sorted(letta_fake.deleted) == sorted(letta_fake.created)


def test_cleanup_false_keeps_the_agents(letta_fake, tmp_path):
    target = make(letta_fake, tmp_path, cleanup=False)
    run(target, sample("one", 0), sample("two", 1))
    assert letta_fake.deleted == []
    assert letta_fake.live() == letta_fake.created == [a["id"] for a in target.ledger.kept]
    assert [a["name"] for a in target.ledger.kept] == ["echo-agent", "echo-agent"]
    assert target.ledger.report()["leftover_agents"] == []


def test_agent_args_update_the_imported_agent_and_its_blocks(letta_fake, tmp_path):
    s = sample("hi", agent_args={"system": "Be brief.", "memory_blocks": {"human": "Name: Ada\n"}})
    [traj] = run(make(letta_fake, tmp_path), s, need_memory=True)
    assert letta_fake.patches == [(letta_fake.created[0], {"system": "Be brief."})]
    assert traj.memory_blocks == {"human": "Name: Ada\n- hi\n"}


def test_existing_agent_id_is_shared_and_never_deleted(letta_fake, tmp_path):
    agent = letta_fake.add_agent(blocks={"human": ""})
    trajs = run(
        make(letta_fake, tmp_path, agent_id=agent),
        sample("one", 0),
        sample("two", 1),
        need_memory=True,
    )
    assert letta_fake.sent == [(agent, "one"), (agent, "two")]
    assert trajs[1].memory_blocks == {"human": "- one\n- two\n"}
    assert letta_fake.created == [] and letta_fake.deleted == [] and agent in letta_fake.agents


def test_existing_agent_id_refuses_agent_args(letta_fake, tmp_path):
    agent = letta_fake.add_agent()
    with pytest.raises(SampleError) as err:
        run(make(letta_fake, tmp_path, agent_id=agent), sample("x", agent_args={"system": "s"}))
    assert str(err.value) == (
        "agent_args cannot be applied to an existing agent (agent_id); "
        "use agent_file or agent_script"
    )


def test_agent_script_factory_gets_client_and_sample_and_its_agent_is_deleted(letta_fake, tmp_path):
    (tmp_path / "factory.py").write_text(
        "async def make(client, sample):\n"
        "    agent = await client.agents.create(name='made', memory_blocks=[\n"
        "        {'label': 'human', 'value': 'Name: ' + sample.agent_args['name'] + '\\n'}])\n"
        "    return agent.id\n"
    )
    target = make(letta_fake, tmp_path, agent_script="factory.py:make")
    [traj] = run(target, sample("hi", agent_args={"name": "Ada"}), need_memory=True)
    assert traj.memory_blocks == {"human": "Name: Ada\n- hi\n"}
    assert letta_fake.patches == []  # the factory applied agent_args itself
    assert letta_fake.created == letta_fake.deleted == [traj.metadata["agent_id"]]


def test_sync_factory_may_return_an_id(letta_fake, tmp_path):
    agent = letta_fake.add_agent("premade")
    (tmp_path / "sync_factory.py").write_text(f"def make(client, sample):\n    return {agent!r}\n")
    [traj] = run(make(letta_fake, tmp_path, agent_script="sync_factory.py:make"), sample("hi"))
    assert traj.metadata["agent_id"] == agent
    assert letta_fake.deleted == [agent]


def test_model_handles_are_the_models_and_applied_to_each_agent(letta_fake, tmp_path):
    target = make(letta_fake, tmp_path, model_handles=["openai/gpt-4.1", "anthropic/claude-x"])
    assert target.models() == ["openai/gpt-4.1", "anthropic/claude-x"]
    [traj] = run(target, sample("hi"), model="anthropic/claude-x")
    assert letta_fake.imports == [
        {
            "override_name": "echo-agent",
            "override_existing_tools": "false",
            "override_model_handle": "anthropic/claude-x",
        }
    ]
    assert letta_fake.patches == []  # the import itself applies the handle
    assert traj.metadata["model"] == "anthropic/claude-x"
    assert make(letta_fake, tmp_path).models() == [None]


# -- failures and retries -------------------------------------------------------------------------


def test_a_failed_attempt_is_retried_with_a_fresh_agent_and_deleted(letta_fake, tmp_path):
    letta_fake.fail("POST", r"/v1/agents/[^/]+/messages", status=500)
    [traj] = run(make(letta_fake, tmp_path, max_retries=2, retry_backoff=0), sample("hi"))
    assert traj.metadata["retries"] == 1
    assert len(letta_fake.created) == 2
    assert traj.metadata["agent_id"] == letta_fake.created[1]
    assert letta_fake.live() == []


def test_exhausted_retries_raise_a_target_error_and_leave_nothing(letta_fake, tmp_path):
    letta_fake.fail("POST", r"/v1/agents/[^/]+/messages", status=503, times=3)
    with pytest.raises(SampleError) as err:
        run(
            make(letta_fake, tmp_path, max_retries=2, retry_backoff=0, api_key="sk-secret-123"),
            sample("hi"),
        )
    agent = letta_fake.created[2]
    assert str(err.value) == (
        f"Letta agent run failed after 3 attempts: Letta returned HTTP 503 for "
        f"POST /v1/agents/{agent}/messages: injected fault"
    )
    assert err.value.category == "target"
    assert "sk-secret-123" not in repr(err.value.__dict__)
    assert letta_fake.live() == []


def test_attempts_follow_the_shared_backoff_jittered_capped_and_bounded(
    letta_fake, tmp_path, monkeypatch
):
    watched = watch_letta_backoff(monkeypatch)
    monkeypatch.setattr(retry, "ATTEMPT_BACKOFF_CAP", 2.5)
    letta_fake.fail("POST", r"/v1/agents/[^/]+/messages", status=503, times=10)
    with pytest.raises(SampleError) as err:
        run(make(letta_fake, tmp_path, max_retries=3, retry_backoff=1.0), sample("hi"))
    assert str(err.value).startswith("Letta agent run failed after 4 attempts: ")
    assert err.value.retries == 3
    assert letta_fake.count("POST", r"/v1/agents/[^/]+/messages") == 4  # max_retries bounds it
    assert watched.bounds() == [1.0, 2.0, 2.5]  # retry_backoff doubling, capped
    assert watched.slept == watched.rng.drawn  # each wait drawn from [bound / 2, bound]
    assert watched.slept != watched.bounds()  # jittered, not the bound itself


@pytest.mark.parametrize(("asked", "waited"), [("7", 7.0), ("600", 60.0)])
def test_a_retry_waits_for_the_servers_retry_after_up_to_a_minute(
    letta_fake, tmp_path, monkeypatch, asked, waited
):
    watched = watch_letta_backoff(monkeypatch)
    letta_fake.fail(
        "POST", r"/v1/agents/[^/]+/messages", status=429, headers={"Retry-After": asked}
    )
    [traj] = run(make(letta_fake, tmp_path, max_retries=1, retry_backoff=1.0), sample("hi"))
    assert traj.metadata["retries"] == 1  # a longer ask still gets its retry, after a minute
    assert (watched.bounds(), watched.slept) == ([1.0], [waited])


def test_client_errors_are_not_retried(letta_fake, tmp_path):
    letta_fake.fail("POST", "/v1/agents/import", status=422, times=5)
    with pytest.raises(SampleError) as err:
        run(make(letta_fake, tmp_path, max_retries=3, retry_backoff=0), sample("hi"))
    assert str(err.value) == (
        "Letta agent run failed: Letta returned HTTP 422 for POST /v1/agents/import: injected fault"
    )
    assert letta_fake.count("POST", "/v1/agents/import") == 1


def test_a_hanging_server_times_out_and_the_agent_is_deleted(letta_fake, tmp_path):
    letta_fake.fail("POST", r"/v1/agents/[^/]+/messages", hang=5)
    with pytest.raises(SampleError) as err:
        run(make(letta_fake, tmp_path, timeout=0.3), sample("hi"))
    assert str(err.value) == f"Letta agent run failed: Letta request timed out ({letta_fake.url})"
    assert letta_fake.live() == []


def test_an_unreachable_server_is_a_clear_error(tmp_path):
    fake = FakeLetta()
    fake.url = "http://127.0.0.1:9"  # discard port: nothing listens
    with pytest.raises(SampleError) as err:
        run(make(fake, tmp_path), sample("hi"))
    assert str(err.value) == (
        "Letta agent run failed: cannot reach the Letta server at http://127.0.0.1:9: "
        "nothing listens there (connection refused)"
    )


def test_a_run_stopped_by_an_llm_error_is_a_target_error(letta_fake, tmp_path):
    letta_fake.stop_reason = "llm_api_error"
    with pytest.raises(SampleError) as err:
        run(make(letta_fake, tmp_path), sample("hi"))
    assert str(err.value) == "Letta agent run failed: the Letta run stopped with 'llm_api_error'"
    assert letta_fake.live() == []


def test_aclose_deletes_agents_of_a_cancelled_sample(letta_fake, tmp_path):
    letta_fake.fail("POST", r"/v1/agents/[^/]+/messages", hang=3)
    target = make(letta_fake, tmp_path)

    async def go():
        await target.start()
        task = asyncio.create_task(target.run(sample("hi")))
        # cancelled once the client holds the agent's id (its message then hangs): waiting on the
        # server's side alone raced the client reading the import's answer under CI's load
        while not target.ledger.live:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await target.aclose()

    asyncio.run(go())
    assert letta_fake.live() == []


def _cancel_after(target, ready, after: float) -> float:
    """Start a sample, cancel it ``after`` s once ``ready()`` and again 50 ms later (one stop
    arrives as several: gather cancels its workers, the runner once more), close the target; the
    seconds the cancel took to land."""

    async def go() -> float:
        await target.start()
        task = asyncio.create_task(target.run(sample("hi")))
        while not ready():
            await asyncio.sleep(0.01)
        await asyncio.sleep(after)
        t0 = time.monotonic()
        task.cancel()
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        took = time.monotonic() - t0
        await target.aclose()
        return took

    return asyncio.run(go())


def _cancel_during_import(fake, target, after: float) -> float:
    """:func:`_cancel_after` ``after`` s into the sample's import."""
    return _cancel_after(target, lambda: fake.count("POST", "/v1/agents/import"), after)


def test_an_import_answering_after_the_cancel_is_still_deleted(letta_fake, tmp_path, capsys):
    # the server makes the agent 0.5 s after the sample was cancelled: the sent import may still
    # answer, so its agent is known and deleted (it used to stay on the server, unnamed)
    letta_fake.fail("POST", "/v1/agents/import", status=None, hang=0.6)
    target = make(letta_fake, tmp_path)
    took = _cancel_during_import(letta_fake, target, after=0.1)
    assert 0.3 < took < 3, f"{took:.2f} s"
    assert len(letta_fake.created) == 1
    assert letta_fake.live() == []
    assert target.ledger.report() == {"leftover_agents": [], "kept_agents": []}
    assert capsys.readouterr().err == ""


def test_an_import_failing_after_the_cancel_leaves_nothing_to_delete(letta_fake, tmp_path, capsys):
    letta_fake.fail("POST", "/v1/agents/import", status=500, hang=0.4)
    target = make(letta_fake, tmp_path)
    took = _cancel_during_import(letta_fake, target, after=0.1)
    assert took < 3, f"{took:.2f} s"
    assert (letta_fake.created, target.ledger.unanswered, capsys.readouterr().err) == ([], [], "")


def test_an_import_silent_past_the_bound_is_named_as_possibly_left(
    letta_fake, tmp_path, capsys, monkeypatch
):
    from ci_evals.letta import agents

    monkeypatch.setattr(agents, "SETTLE_S", 0.3)
    letta_fake.fail("POST", "/v1/agents/import", status=None, hang=3)
    target = make(letta_fake, tmp_path)
    took = _cancel_during_import(letta_fake, target, after=0.05)
    assert 0.25 < took < 1.5, f"{took:.2f} s"  # the bound, not the server, decides
    block = target.ledger.report()
    assert block == {"leftover_agents": [], "kept_agents": [], "unanswered_imports": ["echo-agent"]}
    assert capsys.readouterr().err == ""
    summary = {"letta": {**block, "base_url": letta_fake.url}}
    said = (
        f"1 agent import(s) or agent_script call(s) on {letta_fake.url} had not answered when "
        "their sample was cut off (Ctrl-C, a time limit): the server may hold agents that this "
        "run could not delete, ids unknown"
    )
    assert console_lines(summary) == [f"Letta: {said}: echo-agent"]
    assert comment_lines(summary) == [f"⚠️ {escape_md(said)}: echo-agent", ""]


def _cancel_during_factory(fake, tmp_path, body: str, after: float = 0.1):
    """An ``agent_script`` factory (``body``, given ``client, sample``) runs and the sample is
    cancelled ``after`` s in (:func:`_cancel_after`): (the target, seconds the cancel took)."""
    (tmp_path / "slow_factory.py").write_text(body)
    target = make(fake, tmp_path, agent_script="slow_factory.py:make")
    return target, _cancel_after(target, lambda: True, after)


ASYNC_SLOW = (
    "import asyncio\n"
    "async def make(client, sample):\n"
    "    agent = await client.agents.create(name='made')\n"
    "    await asyncio.sleep(0.5)  # a factory still setting its agent up when the stop comes\n"
    "    return agent.id\n"
)
SYNC_SLOW = (
    "import time, httpx\ndef make(client, sample):\n    time.sleep(0.5)\n    return FAKE_ID\n"
)


def test_an_agent_script_agent_made_after_the_cancel_is_still_deleted(letta_fake, tmp_path):
    # the factory made its agent and was still working when the sample was cancelled: its task
    # goes on for up to 5 s and the agent it returns is deleted (it used to stay on the server)
    target, took = _cancel_during_factory(letta_fake, tmp_path, ASYNC_SLOW)
    assert 0.2 < took < 3, f"{took:.2f} s"
    assert len(letta_fake.created) == 1 and letta_fake.live() == []
    assert target.ledger.report() == {"leftover_agents": [], "kept_agents": []}


def test_a_sync_agent_script_answering_after_the_cancel_has_its_agent_deleted(letta_fake, tmp_path):
    agent = letta_fake.add_agent("premade")  # what a sync factory returns 0.5 s in, on its thread
    target, took = _cancel_during_factory(
        letta_fake, tmp_path, SYNC_SLOW.replace("FAKE_ID", repr(agent))
    )
    assert 0.2 < took < 3, f"{took:.2f} s"
    assert letta_fake.deleted == [agent] and letta_fake.live() == []


def test_an_agent_script_silent_past_the_bound_is_named_as_possibly_left(
    letta_fake, tmp_path, monkeypatch
):
    from ci_evals.letta import agents

    monkeypatch.setattr(agents, "SETTLE_S", 0.3)
    body = ASYNC_SLOW.replace("asyncio.sleep(0.5)", "asyncio.sleep(30)")
    target, took = _cancel_during_factory(letta_fake, tmp_path, body)
    assert 0.25 < took < 1.5, f"{took:.2f} s"  # the bound, not the factory, decides
    assert target.ledger.report() == {
        "leftover_agents": [],
        "kept_agents": [],
        "unanswered_imports": ["agent_script slow_factory.py:make"],
    }


def test_an_agent_script_raising_systemexit_is_that_samples_error(letta_fake, tmp_path):
    (tmp_path / "exit_factory.py").write_text(
        "def make(client, sample):\n    raise SystemExit(3)\n"
    )
    with pytest.raises(SampleError) as err:
        run(make(letta_fake, tmp_path, agent_script="exit_factory.py:make"), sample("hi"))
    assert (type(err.value).__name__, str(err.value)) == (
        "SampleError",
        "Letta agent run failed: UserCodeExit: SystemExit(3)",
    )


# -- connection settings --------------------------------------------------------------------------


def test_override_existing_tools_is_sent_only_when_the_suite_asks(letta_fake, tmp_path):
    run(make(letta_fake, tmp_path, override_existing_tools=True), sample("hi"))
    assert letta_fake.imports == [
        {"override_name": "echo-agent", "override_existing_tools": "true"}
    ]
    assert (
        LettaTargetSpec.model_validate({"kind": "agent", "agent_id": "a"}).override_existing_tools
        is False
    )


def test_api_key_and_project_are_sent(letta_fake, tmp_path):
    run(make(letta_fake, tmp_path, api_key="sk-secret-123", project_id="proj-1"), sample("hi"))
    assert {h.get("authorization") for h in letta_fake.headers} == {"Bearer sk-secret-123"}
    assert {h.get("x-project-id") for h in letta_fake.headers} == {"proj-1"}
    assert letta_fake.imports == [
        {"override_name": "echo-agent", "override_existing_tools": "false", "project_id": "proj-1"}
    ]


def test_base_url_comes_from_the_env_when_not_in_yaml(letta_fake, tmp_path, monkeypatch):
    monkeypatch.setenv("LETTA_BASE_URL", letta_fake.url + "/v1")
    af = write_agent_file(tmp_path / "a.af", agent_file())
    target = LettaTarget(LettaTargetSpec(kind="letta_agent", agent_file=str(af)), Context(tmp_path))
    assert target.base_url == letta_fake.url
    [traj] = run(target, sample("hi"))
    assert traj.turns[0][-1].content == "ECHO: hi"
    monkeypatch.delenv("LETTA_BASE_URL")
    assert base_url_of(LettaTargetSpec(kind="agent")) == "http://localhost:8283"


# -- validation (offline) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, "an agent target needs one of agent_file, agent_id or agent_script"),
        (
            {"agent_id": "a", "agent_script": "f.py:g"},
            "an agent target takes only one of agent_file, agent_id, agent_script; got agent_id and agent_script",
        ),
        ({"agent_file": "missing.af"}, "agent file not found: {tmp}/missing.af"),
        ({"agent_file": "agent.json"}, "agent file must have the .af extension: agent.json"),
        (
            {"agent_file": "bad.af"},
            "agent file bad.af is not valid JSON: Expecting value: line 1 column 1 (char 0)",
        ),
        ({"agent_file": "two.af"}, "agent file two.af must hold exactly one agent, found 2"),
        (
            {"agent_id": "a", "model_handles": ["openai/x"]},
            "model_handles cannot be used with agent_id: it would change the model of an agent shared by all "
            "samples; use agent_file or agent_script so each sample gets its own agent",
        ),
        (
            {"agent_id": "a", "model_handles": []},
            "model_handles must be a non-empty list of distinct handles",
        ),
        (
            {"agent_id": "a", "model_configs": ["gpt-4o-mini"]},
            "model_configs (letta-evals' bundled LLM config files) is not supported; list Letta model handles in "
            "model_handles, e.g. [openai/gpt-4o-mini]",
        ),
        (
            {"agent_script": "fac.py:two"},
            "agent factory 'fac.py:two' must take (client, sample), it takes 1 parameters",
        ),
    ],
)
def test_invalid_targets_fail_at_construction(tmp_path, raw, message):
    (tmp_path / "bad.af").write_text("not json")
    write_agent_file(tmp_path / "two.af", agent_file(agents=2))
    (tmp_path / "fac.py").write_text("def two(client):\n    return 'x'\n")
    with pytest.raises(ConfigError) as err:
        LettaTarget(LettaTargetSpec.model_validate({"kind": "agent", **raw}), Context(tmp_path))
    assert err.value.message == message.format(tmp=tmp_path)


# -- examples through the CLI ---------------------------------------------------------------------


def _cli(args):
    from ci_evals.cli.app import main

    return main(args)


@pytest.mark.parametrize("suite", ["suite.yaml", "suite-factory.yaml", "suite-model-judge.yaml"])
def test_letta_evals_05_suites_validate_unchanged(suite):
    assert _cli(["validate", str(EXAMPLES / "letta-evals-0.5" / suite)]) == 0


def test_letta_evals_05_suite_runs_per_model_against_the_fake(letta_fake, tmp_path, monkeypatch):
    monkeypatch.setenv("LETTA_BASE_URL", letta_fake.url)
    out = tmp_path / "out"
    rc = _cli(["run", str(EXAMPLES / "letta-evals-0.5" / "suite.yaml"), "--output", str(out)])
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rc == 0
    assert len(rows) == 5 * 2 * 2  # samples x model handles x num_runs
    assert sorted(summary["models"]) == ["openai/gpt-4.1-mini", "openai/gpt-4o-mini"]
    assert {k: v["mean"] for k, v in summary["metrics"].items()} == {
        "exact": 0.8,
        "capital_named": 0.8,
        "lookup_args": 1.0,
        "judge": 0.8,
    }
    assert summary["errors"]["total"] == 0
    assert letta_fake.live() == []
    targets = [i for i in letta_fake.imports if i["override_name"] == "capital-agent"]
    assert (
        sorted(i["override_model_handle"] for i in targets)
        == ["openai/gpt-4.1-mini"] * 10 + ["openai/gpt-4o-mini"] * 10
    )


def test_letta_evals_05_factory_suite_runs_against_the_fake(letta_fake, tmp_path, monkeypatch):
    monkeypatch.setenv("LETTA_BASE_URL", letta_fake.url)
    out = tmp_path / "out"
    rc = _cli(
        ["run", str(EXAMPLES / "letta-evals-0.5" / "suite-factory.yaml"), "--output", str(out)]
    )
    summary = json.loads((out / "summary.json").read_text())
    assert rc == 0
    assert summary["metrics"]["remembers_name"]["mean"] == 1.0
    assert letta_fake.live() == []


def test_the_client_exists_before_start_for_setup_scripts(letta_fake, tmp_path):
    from letta_client import AsyncLetta

    target = make(letta_fake, tmp_path)
    assert isinstance(target.client, AsyncLetta)
    assert str(target.client.base_url).rstrip("/") == letta_fake.url
    asyncio.run(target.aclose())
