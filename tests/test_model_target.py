"""The model target (a chat model over an OpenAI-compatible API) end to end over HTTP."""

from __future__ import annotations

import asyncio

import pytest

import ci_evals.llm.client as llm_client
from ci_evals._util.errors import ConfigError, SampleError
from ci_evals._util.registry import TARGETS
from ci_evals.config.specs import Context, validate_model
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Message, ToolCall
from ci_evals.targets.model import TOOL_NOT_RUN, ModelTarget
from tests.fakes.openai_server import FakeOpenAI, last_user, openai_env, openai_server  # noqa: F401

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(llm_client, "BACKOFF_BASE", 0.01)


def make(raw: dict, tmp_path, *, cache: bool = False) -> ModelTarget:
    ctx = Context(
        tmp_path, tmp_path / "suite.yaml", cache_dir=tmp_path / "cache" if cache else None
    )
    cls = TARGETS.get("model")
    return cls(
        validate_model(cls.spec_model, {"kind": "model", "model": "gpt-4o-mini", **raw}, "target"),
        ctx,
    )


def run(target: ModelTarget, sample: Sample, *, run: int = 0):
    async def go():
        await target.start()
        try:
            return await target.run(sample, run=run)
        finally:
            await target.aclose()

    return asyncio.run(go())


def test_single_turn_with_system_prompt(openai_env, tmp_path):
    openai_env.script("Paris.")
    traj = run(
        make({"system_prompt": "Be brief.", "temperature": 0.0, "max_tokens": 50}, tmp_path),
        Sample(id=1, input="Capital of France?"),
    )
    assert openai_env.bodies() == [
        {
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Capital of France?"},
            ],
            "temperature": 0.0,
            "max_tokens": 50,
        }
    ]
    assert traj.turns == [[Message("user", "Capital of France?"), Message("assistant", "Paris.")]]
    assert traj.usage.to_dict() == {"prompt_tokens": 5, "completion_tokens": 1}
    assert traj.metadata == {
        "model": "gpt-4o-mini",
        "run": 0,
        "cache_hits": 0,
        "retries": 0,
        "steps": 1,
        "cost_usd": pytest.approx((5 * 0.15 + 1 * 0.6) / 1e6, rel=1e-12),  # genai-prices' rates
    }


def test_no_options_sends_only_model_and_messages(openai_env, tmp_path):
    run(make({}, tmp_path), Sample(id=1, input="hi"))
    assert openai_env.bodies() == [
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    ]


def test_multi_turn_keeps_history(openai_env, tmp_path):
    openai_env.script("Hello Ana!", "Your name is Ana.")
    traj = run(
        make({"system_prompt": "Be kind."}, tmp_path),
        Sample(id=1, input=["I'm Ana.", "What's my name?"]),
    )
    first, second = openai_env.bodies()
    assert second["messages"] == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "I'm Ana."},
        {"role": "assistant", "content": "Hello Ana!"},
        {"role": "user", "content": "What's my name?"},
    ]
    assert len(first["messages"]) == 2
    assert traj.turns == [
        [Message("user", "I'm Ana."), Message("assistant", "Hello Ana!")],
        [Message("user", "What's my name?"), Message("assistant", "Your name is Ana.")],
    ]
    assert traj.assistant_texts()[-1] == "Your name is Ana."
    assert traj.usage.to_dict() == {"prompt_tokens": 4 + 9, "completion_tokens": 2 + 4}


def test_tool_calls_are_recorded_and_end_the_turn(openai_env, tmp_path):
    openai_env.script(
        {
            "content": None,
            "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": {"city": "Oslo"}}],
        }
    )
    traj = run(make({"tools": [WEATHER_TOOL]}, tmp_path), Sample(id=1, input="Weather in Oslo?"))
    assert openai_env.bodies()[0]["tools"] == [WEATHER_TOOL]
    assert traj.turns == [
        [
            Message("user", "Weather in Oslo?"),
            Message("assistant", "", [ToolCall("call_1", "get_weather", '{"city": "Oslo"}')]),
        ]
    ]
    assert [tc.to_openai() for tc in traj.tool_calls()] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        }
    ]


def test_short_tool_form_is_normalised(openai_env, tmp_path):
    short = {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": WEATHER_TOOL["function"]["parameters"],
    }
    run(make({"tools": [short]}, tmp_path), Sample(id=1, input="x"))
    assert openai_env.bodies()[0]["tools"] == [WEATHER_TOOL]


def test_a_later_turn_after_tool_calls_gets_placeholder_results(openai_env, tmp_path):
    openai_env.script(
        {"tool_calls": [{"id": "c9", "name": "get_weather", "arguments": "{}"}]}, "Sorry, no tools."
    )
    traj = run(make({"tools": [WEATHER_TOOL]}, tmp_path), Sample(id=1, input=["Weather?", "Well?"]))
    assert openai_env.bodies()[1]["messages"] == [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c9",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c9", "content": TOOL_NOT_RUN},
        {"role": "user", "content": "Well?"},
    ]
    assert [m.role for turn in traj.turns for m in turn] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o-mini", {"temperature": 0.2, "max_tokens": 64}),
        ("o3-mini", {"temperature": 1.0, "max_completion_tokens": 64}),
    ],
)
def test_reasoning_models_get_temperature_one_and_max_completion_tokens(
    openai_env, tmp_path, model, expected
):
    run(
        make({"model": model, "temperature": 0.2, "max_tokens": 64}, tmp_path),
        Sample(id=1, input="x"),
    )
    body = openai_env.bodies()[0]
    assert {k: v for k, v in body.items() if k not in ("model", "messages")} == expected


def test_system_prompt_file(openai_env, tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "sys.txt").write_text("You are terse.")
    run(make({"system_prompt_path": "prompts/sys.txt"}, tmp_path), Sample(id=1, input="x"))
    assert openai_env.bodies()[0]["messages"][0] == {"role": "system", "content": "You are terse."}


def test_repeats_are_independent_and_cached(openai_env, tmp_path):
    target = make({}, tmp_path, cache=True)
    sample = Sample(id=1, input="hi")
    run(target, sample, run=0)
    run(target, sample, run=1)
    again = run(target, sample, run=0)
    assert openai_env.count() == 2
    assert (again.metadata["cache_hits"], again.usage.to_dict()) == (
        1,
        {"prompt_tokens": 0, "completion_tokens": 0},
    )


def test_retries_and_throttling_waits_are_counted_apart_in_metadata(openai_env, tmp_path):
    openai_env.fault("429", first=1, retry_after="0")
    openai_env.fault("reset", first=1)
    traj = run(make({}, tmp_path), Sample(id=1, input="hi"))
    assert (traj.metadata["retries"], traj.metadata["throttled"], traj.assistant_texts()) == (
        1,
        1,
        ["hi"],
    )


def test_failure_after_retries_is_a_sample_error(openai_env, tmp_path):
    openai_env.fault("502")
    with pytest.raises(SampleError) as info:
        run(make({"max_retries": 1}, tmp_path), Sample(id=1, input="hi"))
    assert str(info.value) == (
        f"model call failed on turn 1: {openai_env.url}/chat/completions: "
        "HTTP 502: injected 502 (after 1 retries)"
    )
    assert info.value.category == "target"


def test_timeout_is_a_sample_error(openai_env, tmp_path):
    openai_env.fault("hang")
    with pytest.raises(SampleError) as info:
        run(make({"timeout": 0.2, "max_retries": 0}, tmp_path), Sample(id=1, input="hi"))
    assert (
        str(info.value)
        == f"model call failed on turn 1: {openai_env.url}/chat/completions: timed out after 0.2 s"
    )


def test_pricing_puts_cost_in_metadata(openai_env, tmp_path):
    target = make({}, tmp_path)
    target.ctx.pricing = {"gpt-4o-mini": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
    traj = run(target, Sample(id=1, input="one two three"))
    assert traj.metadata["cost_usd"] == pytest.approx((3 * 1.0 + 3 * 2.0) / 1e6)


def test_target_base_url_overrides_environment(openai_server, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    traj = run(make({"base_url": openai_server.url}, tmp_path), Sample(id=1, input="hi"))
    assert (traj.assistant_texts(), openai_server.count()) == (["hi"], 1)


def test_scripted_replies_can_depend_on_the_request(tmp_path, monkeypatch):
    with FakeOpenAI(lambda req: last_user(req).upper()) as server:
        traj = run(make({"base_url": server.url}, tmp_path), Sample(id=1, input="shout"))
    assert traj.assistant_texts() == ["SHOUT"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"system_prompt": "a", "system_prompt_path": "b"},
            "target: give at most one of 'system_prompt' or 'system_prompt_path'",
        ),
        (
            {"tools": [{"type": "function"}]},
            "target.tools: tools[0] must be {type: function, function: {name, parameters}}",
        ),
        ({"max_tokens": 0}, "target.max_tokens: Input should be greater than 0 (got 0)"),
        (
            {"temprature": 0},
            "target.temprature: unknown key 'temprature' (did you mean 'temperature'?)",
        ),
    ],
)
def test_invalid_specs(tmp_path, raw, message):
    with pytest.raises(ConfigError) as info:
        make(raw, tmp_path)
    assert str(info.value) == message


def test_missing_system_prompt_file_is_named(tmp_path):
    with pytest.raises(ConfigError) as info:
        make({"system_prompt_path": "nope.txt"}, tmp_path)
    assert (
        str(info.value)
        == f"target.system_prompt_path: cannot read system prompt {tmp_path / 'nope.txt'}: file not found"
    )


def test_model_is_required(tmp_path):
    cls = TARGETS.get("model")
    with pytest.raises(ConfigError) as info:
        validate_model(cls.spec_model, {"kind": "model"}, "target")
    assert str(info.value) == "target.model: required key is missing"
