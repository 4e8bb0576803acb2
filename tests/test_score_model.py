"""score_model and label_model graders (OpenAI's format) end to end over HTTP."""

from __future__ import annotations

import asyncio
import json

import pytest

import ci_evals.llm.client as llm_client
from ci_evals._util.errors import ConfigError
from ci_evals.config.specs import Context
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Message, ToolCall, Trajectory
from ci_evals.graders.base import build_grader
from tests.fakes.openai_server import openai_env, openai_server, prompt_text  # noqa: F401

SCORE_FORMAT = (
    'Respond with a JSON object of this shape: {"result": <a number from 0 to 1>, '
    '"steps": [{"description": "<what you checked>", "conclusion": "<what you found>"}]}'
)

SYSTEM = """You are an expert grader evaluating customer service responses.

Score the response based on:
1. Accuracy - Does it correctly answer the question?
2. Helpfulness - Is it actionable and clear?
3. Tone - Is it professional and empathetic?

If all criteria are met, score 1.0.
If mostly met with minor issues, score 0.7.
If significant issues, score 0.3.
If completely wrong or unhelpful, score 0.0.

Return your score in the 'result' field."""

# The seed's "Full Example", pasted verbatim (type/name instead of kind/display_name).
SEED = {
    "type": "score_model",
    "name": "Response quality",
    "input": [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": "Customer question: {{ item.question }}\n\nReference answer: "
            "{{ item.reference_answer }}\n\nAgent response: {{ sample.output_text }}\n\n"
            "Grade this response.",
        },
    ],
    "model": "gpt-4.1",
    "range": [0, 1],
    "pass_threshold": 0.7,
    "sampling_params": {"temperature": 0.0, "max_completions_tokens": 2048},
}
SEED_STEPS = [
    {"description": "Evaluating accuracy", "conclusion": "Response correctly identifies the issue"},
    {"description": "Evaluating helpfulness", "conclusion": "Clear next steps provided"},
]
TICKET = Sample(
    id=1,
    input="Where is my order?",
    extra_vars={
        "question": "Where is my order?",
        "reference_answer": "Check the tracking link in your email.",
    },
)


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(llm_client, "BACKOFF_BASE", 0.01)


def make(raw: dict, tmp_path, *, cache: bool = False):
    ctx = Context(
        tmp_path, tmp_path / "suite.yaml", cache_dir=tmp_path / "cache" if cache else None
    )
    return build_grader("judge", raw, ctx)


def grade(
    grader,
    sample: Sample = TICKET,
    submission: str = "Use the tracking link we emailed you.",
    trajectory=None,
) -> GradeResult:
    async def go():
        await grader.start()
        try:
            return await grader.grade(
                sample, submission, trajectory or Trajectory.from_text(submission)
            )
        finally:
            await grader.aclose()

    return asyncio.run(go())


# --- score_model --------------------------------------------------------------------------------


def test_seed_full_example_renders_messages_and_scores(openai_env, tmp_path):  # noqa: F811
    reply = {"result": 0.85, "steps": SEED_STEPS}
    openai_env.script(reply)
    grader = make(SEED, tmp_path)
    g = grade(grader)
    (body,) = openai_env.bodies()
    assert body == {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": f"{SYSTEM}\n\n{SCORE_FORMAT}"},
            {
                "role": "user",
                "content": "Customer question: Where is my order?\n\nReference answer: Check the tracking "
                "link in your email.\n\nAgent response: Use the tracking link we emailed you."
                "\n\nGrade this response.",
            },
        ],
        "temperature": 0.0,
        "max_completion_tokens": 2048,
        "response_format": {"type": "json_object"},
    }
    assert g == GradeResult(
        score=0.85,
        rationale="Evaluating accuracy: Response correctly identifies the issue\n"
        "Evaluating helpfulness: Clear next steps provided",
        metadata={
            "model": "gpt-4.1",
            "result": 0.85,
            "range": [0.0, 1.0],
            "steps": SEED_STEPS,
            "usage": {
                "prompt_tokens": len(prompt_text(body).split()),
                "completion_tokens": len(json.dumps(reply).split()),
            },
            "cache_hits": 0,
            "retries": 0,
            # genai-prices' gpt-4.1: $2 in, $8 out per million tokens
            "cost_usd": pytest.approx(
                (len(prompt_text(body).split()) * 2 + len(json.dumps(reply).split()) * 8) / 1e6,
                rel=1e-12,
            ),
        },
    )
    assert (grader.label, grader.spec.pass_threshold) == ("Response quality", 0.7)


@pytest.mark.parametrize(
    ("result", "score"), [(7, 0.7), (12, 1.0), (-3, 0.0), (0, 0.0), (10, 1.0), ("5", 0.5)]
)
def test_result_is_clamped_to_range_and_normalised(openai_env, tmp_path, result, score):  # noqa: F811
    openai_env.script({"result": result, "steps": []})
    raw = {
        "type": "score_model",
        "input": [{"role": "user", "content": "Rate {{ sample.output_text }} 0-10"}],
        "range": [0, 10],
        "pass_threshold": 7,
    }
    grader = make(raw, tmp_path)
    g = grade(grader)
    assert (g.score, g.error, g.metadata["range"]) == (pytest.approx(score), None, [0.0, 10.0])
    assert grader.spec.pass_threshold == 0.7
    assert "<a number from 0 to 10>" in openai_env.bodies()[0]["messages"][0]["content"]


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ({"result": "great", "steps": []}, "judge reply 'result' is not a number: 'great'"),
        ({"steps": []}, "judge reply has no 'result' (keys: steps)"),
        ("no json here", "judge reply is not a JSON object: 'no json here'"),
    ],
)
def test_unusable_result_is_an_error_grade(openai_env, tmp_path, reply, error):  # noqa: F811
    openai_env.script(reply)
    g = grade(make(SEED, tmp_path))
    assert (g.score, g.error, g.rationale, g.metadata["error"]) == (
        0.0,
        error,
        f"Error during grading: {error}",
        error,
    )


def test_missing_template_variable_is_an_error_grade_without_a_call(openai_env, tmp_path):  # noqa: F811
    g = grade(make(SEED, tmp_path), Sample(id=2, input="q", extra_vars={"question": "q"}))
    assert (g.score, g.error, openai_env.count()) == (
        0.0,
        "template variable {{ item.reference_answer }} is missing ('reference_answer' not found)",
        0,
    )


def test_nested_item_paths_and_output_tools(openai_env, tmp_path):  # noqa: F811
    raw = {
        "type": "score_model",
        "input": [
            {"role": "developer", "content": "Grade it."},
            {
                "role": "user",
                "content": "Topic {{ item.metadata.topic }}; called {{ sample.output_tools[0].function.name }}"
                " with {{ sample.output_tools[0].function.arguments }}; json {{ sample.output_json.n }}",
            },
        ],
    }
    traj = Trajectory(
        turns=[
            [Message("assistant", '{"n": 3}', [ToolCall("c1", "get_weather", '{"city": "Oslo"}')])]
        ]
    )
    grade(
        make(raw, tmp_path),
        Sample(id=1, input="q", metadata={"topic": "weather"}),
        '{"n": 3}',
        traj,
    )
    messages = openai_env.bodies()[0]["messages"]
    assert messages[0] == {"role": "system", "content": f"Grade it.\n\n{SCORE_FORMAT}"}
    assert (
        messages[1]["content"] == 'Topic weather; called get_weather with {"city": "Oslo"}; json 3'
    )


def test_content_parts_become_chat_parts(openai_env, tmp_path):  # noqa: F811
    raw = {
        "type": "score_model",
        "input": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "Does {{ sample.output_text }} describe the image?",
                    },
                    {"type": "input_image", "image_url": "{{ item.image }}", "detail": "low"},
                ],
            }
        ],
    }
    grade(
        make(raw, tmp_path),
        Sample(id=1, input="q", extra_vars={"image": "https://x/cat.png"}),
        "a cat",
    )
    messages = openai_env.bodies()[0]["messages"]
    assert messages == [
        {"role": "system", "content": SCORE_FORMAT},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Does a cat describe the image?"},
                {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}},
            ],
        },
    ]


def test_sampling_params_on_the_wire(openai_env, tmp_path):  # noqa: F811
    raw = dict(
        SEED,
        model="o4-mini-2025-04-16",
        sampling_params={
            "temperature": 0.0,
            "top_p": 0.9,
            "seed": 42,
            "max_completions_tokens": 1024,
            "reasoning_effort": "low",
        },
    )
    grade(make(raw, tmp_path))
    body = openai_env.bodies()[0]
    assert {
        k: body[k]
        for k in ("temperature", "top_p", "seed", "max_completion_tokens", "reasoning_effort")
    } == {
        "temperature": 1.0,
        "top_p": 0.9,
        "seed": 42,
        "max_completion_tokens": 1024,
        "reasoning_effort": "low",
    }


def test_no_sampling_params_sends_none(openai_env, tmp_path):  # noqa: F811
    grade(make({"type": "score_model", "input": [{"role": "user", "content": "x"}]}, tmp_path))
    assert set(openai_env.bodies()[0]) == {"model", "messages", "response_format"}


def test_judge_retries_after_429_and_500(openai_env, tmp_path):  # noqa: F811
    openai_env.fault("429", first=1, retry_after="0")
    openai_env.fault("500", first=1)
    openai_env.script({"result": 1, "steps": []})
    g = grade(make(SEED, tmp_path))
    assert (g.score, g.metadata["retries"], g.metadata["throttled"], openai_env.count()) == (
        1.0,
        1,
        1,
        3,
    )


def test_timeout_is_an_error_grade(openai_env, tmp_path):  # noqa: F811
    openai_env.fault("hang")
    g = grade(make(dict(SEED, timeout=0.2, max_retries=0), tmp_path))
    assert (g.score, g.error) == (0.0, f"{openai_env.url}/chat/completions: timed out after 0.2 s")


def test_second_grade_is_served_from_cache(openai_env, tmp_path):  # noqa: F811
    first = grade(make(SEED, tmp_path, cache=True))
    second = grade(make(SEED, tmp_path, cache=True))
    assert (openai_env.count(), second.score, second.metadata["cache_hits"]) == (1, first.score, 1)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"range": [1, 1]}, "graders.judge: range must be [min, max] with min < max; got [1, 1]"),
        (
            {"range": [0, 10], "pass_threshold": 11},
            "graders.judge: pass_threshold 11 is outside range [0, 10]",
        ),
        (
            {"input": []},
            "graders.judge.input: List should have at least 1 item after validation, not 0",
        ),
        (
            {"input": [{"role": "robot", "content": "x"}]},
            "graders.judge.input[0].role: unknown role 'robot' (valid: assistant, developer, system, user)",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "graders.judge.input[0].content: unknown content part type 'input_audio' (did you mean 'input_image'?)",
        ),
        (
            {"sampling_params": {"reasoning_effort": "extreme"}},
            "graders.judge.sampling_params.reasoning_effort: unknown reasoning_effort 'extreme' (valid: high, low, max, medium, minimal, none, xhigh)",
        ),
        (
            {"sampling_params": {"temprature": 0}},
            "graders.judge.sampling_params.temprature: unknown key 'temprature' (did you mean 'temperature'?)",
        ),
    ],
)
def test_invalid_score_model_specs(tmp_path, raw, message):
    with pytest.raises(ConfigError) as info:
        make({**SEED, **raw}, tmp_path)
    assert str(info.value) == message


# --- label_model --------------------------------------------------------------------------------

LABEL = {
    "type": "label_model",
    "name": "Sentiment",
    "model": "gpt-4o-mini-2024-07-18",
    "input": [{"role": "user", "content": "Classify the sentiment of: {{ sample.output_text }}"}],
    "labels": ["positive", "neutral", "negative"],
    "passing_labels": ["positive", "neutral"],
}
LABEL_FORMAT = (
    'Respond with a JSON object of this shape: {"result": <exactly one of ["positive", "neutral", '
    '"negative"]>, "steps": [{"description": "<what you checked>", "conclusion": "<what you found>"}]}'
)


@pytest.mark.parametrize(
    ("label", "score"),
    [("positive", 1.0), ("neutral", 1.0), ("negative", 0.0), (" positive ", 1.0)],
)
def test_label_model_scores_passing_labels(openai_env, tmp_path, label, score):  # noqa: F811
    openai_env.script({"result": label, "steps": [{"description": "tone", "conclusion": "clear"}]})
    g = grade(make(LABEL, tmp_path), submission="I love it")
    assert (g.score, g.error, g.metadata["label"], g.rationale) == (
        score,
        None,
        label.strip(),
        "tone: clear",
    )
    assert openai_env.bodies()[0]["messages"] == [
        {"role": "system", "content": LABEL_FORMAT},
        {"role": "user", "content": "Classify the sentiment of: I love it"},
    ]


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ({"result": "angry"}, "label 'angry' is not one of positive, neutral, negative"),
        ({"result": 1}, "judge reply has no label in 'result' (got 1)"),
        ({"steps": []}, "judge reply has no label in 'result' (got None)"),
    ],
)
def test_label_outside_labels_is_an_error(openai_env, tmp_path, reply, error):  # noqa: F811
    openai_env.script(reply)
    g = grade(make(LABEL, tmp_path))
    assert (g.score, g.error) == (0.0, error)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"passing_labels": ["great"]},
            "graders.judge: unknown passing label 'great' (valid: negative, neutral, positive)",
        ),
        (
            {"labels": []},
            "graders.judge.labels: List should have at least 1 item after validation, not 0",
        ),
        (
            {"labels": ["a", "a"], "passing_labels": ["a"]},
            "graders.judge.labels: labels must be distinct",
        ),
    ],
)
def test_invalid_label_model_specs(tmp_path, raw, message):
    with pytest.raises(ConfigError) as info:
        make({**LABEL, **raw}, tmp_path)
    assert str(info.value) == message
