"""The rubric (LLM-as-judge) grader end to end over HTTP against the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

import ci_evals.llm.client as llm_client
from ci_evals._util.errors import ConfigError
from ci_evals.config.specs import Context
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Message, ToolCall, Trajectory
from ci_evals.graders.base import build_grader
from ci_evals.graders.judge_prompt import JUDGE_SYSTEM_PROMPT, build_judge_prompt
from ci_evals.graders.rubric import RubricGrader
from tests.fakes.openai_server import (  # noqa: F401
    FakeOpenAI,
    Fault,
    json_mode,
    last_user,
    openai_env,
    openai_server,
    prompt_text,
)

SEED_RUBRIC = """Evaluate the response for accuracy, completeness, and clarity.

Input: {input}
Expected answer: {ground_truth}
Agent response: {submission}

Scoring criteria:
- 1.0: Perfect - accurate, complete, and clear
- 0.8-0.9: Excellent - minor improvements possible
- 0.6-0.7: Good - some gaps or unclear parts
- 0.4-0.5: Adequate - significant issues
- 0.2-0.3: Poor - major problems
- 0.0-0.1: Failed - incorrect or nonsensical

Provide a score between 0.0 and 1.0."""

SEED_REPLY = {
    "score": 0.85,
    "rationale": "The response is accurate and well-explained, but could be more concise.",
}
CAPITAL = Sample(id=1, input="What is the capital of France?", ground_truth="Paris")


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(llm_client, "BACKOFF_BASE", 0.01)


def make(
    raw: dict, tmp_path, *, cache: bool = False, offline: bool = False, name: str = "quality"
) -> RubricGrader:
    ctx = Context(
        tmp_path,
        tmp_path / "suite.yaml",
        cache_dir=tmp_path / "cache" if cache else None,
        offline=offline,
    )
    return build_grader(name, {"kind": "rubric", **raw}, ctx)


def grade(
    grader, sample: Sample = CAPITAL, submission: str = "Paris is the capital.", trajectory=None
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


def words(text: str) -> int:
    return len(text.split())


# --- seed examples ------------------------------------------------------------------------------


def test_seed_rubric_file_scores_and_sends_the_documented_prompt(openai_env, tmp_path):  # noqa: F811
    (tmp_path / "quality_rubric.txt").write_text(SEED_RUBRIC)
    openai_env.script(SEED_REPLY)
    g = grade(
        make({"prompt_path": "quality_rubric.txt", "model": "gpt-4o-mini"}, tmp_path),
        submission="The capital of France is Paris.",
    )
    (body,) = openai_env.bodies()
    user = body["messages"][1]["content"]
    assert (
        user
        == """You are an evaluation judge. An agent was given a task and returned a submission for that task.
Your job is to evaluate the quality of that submission according to the rubric below.

IMPORTANT: Do NOT answer the original question yourself. You are ONLY evaluating someone else's answer.

---

## Evaluation Rubric
Evaluate the response for accuracy, completeness, and clarity.

Input: What is the capital of France?
Expected answer: Paris
Agent response: The capital of France is Paris.

Scoring criteria:
- 1.0: Perfect - accurate, complete, and clear
- 0.8-0.9: Excellent - minor improvements possible
- 0.6-0.7: Good - some gaps or unclear parts
- 0.4-0.5: Adequate - significant issues
- 0.2-0.3: Poor - major problems
- 0.0-0.1: Failed - incorrect or nonsensical

Provide a score between 0.0 and 1.0.

---

## Original Question Given to the Agent
What is the capital of France?

## Expected Answer (Ground Truth)
Paris

---

## The Agent's Submission (What You Are Evaluating)
The capital of France is Paris.

---

## Your Instructions

1. Review the evaluation rubric carefully
2. Compare the agent's submission against the original question and rubric criteria
3. Determine a score between 0.0 (complete failure) and 1.0 (perfect)
4. Return your evaluation as JSON with:
   - score: a float between 0.0 and 1.0
   - rationale: your reasoning for the score"""
    )
    assert {k: v for k, v in body.items() if k != "messages"} == {
        "model": "gpt-4o-mini",
        "temperature": 0.0,
        "response_format": {"type": "json_object"},
    }
    assert body["messages"][0] == {"role": "system", "content": JUDGE_SYSTEM_PROMPT}
    assert g == GradeResult(
        score=0.85,
        rationale=SEED_REPLY["rationale"],
        error=None,
        metadata={
            "model": "gpt-4o-mini",
            "usage": {
                "prompt_tokens": words(prompt_text(body)),
                "completion_tokens": words(json.dumps(SEED_REPLY)),
            },
            "cache_hits": 0,
            "retries": 0,
            # genai-prices' gpt-4o-mini: $0.15 in, $0.60 out per million tokens
            "cost_usd": pytest.approx(
                (words(prompt_text(body)) * 0.15 + words(json.dumps(SEED_REPLY)) * 0.6) / 1e6,
                rel=1e-12,
            ),
        },
    )


def test_system_prompt_is_the_seeds_wording():
    assert JUDGE_SYSTEM_PROMPT.splitlines()[0] == "You are an evaluation judge. You will be given:"
    assert (
        '    "score": (REQUIRED: a decimal number between 0.0 and 1.0 inclusive),'
        in JUDGE_SYSTEM_PROMPT
    )
    assert JUDGE_SYSTEM_PROMPT.endswith("- Be objective and follow the rubric strictly")


def test_seed_inline_prompt_without_ground_truth(openai_env, tmp_path):  # noqa: F811
    prompt = (
        "Rate the creativity and originality of this story.\n\nStory: {submission}\n\n"
        "1.0 = Highly creative and original\n0.5 = Some creative elements\n0.0 = Generic or cliché\n"
    )
    openai_env.script({"score": 0.5, "rationale": "Some creative elements."})
    story = Sample(id="s1", input="Write a story about a dragon.")
    g = grade(make({"prompt": prompt}, tmp_path), story, "Once upon a time a dragon {slept}.")
    user = openai_env.bodies()[0]["messages"][1]["content"]
    assert "Story: Once upon a time a dragon {slept}." in user
    assert "## Expected Answer" not in user
    assert (g.score, g.rationale, g.error) == (0.5, "Some creative elements.", None)


def test_model_judge_is_an_alias(openai_env, tmp_path):  # noqa: F811
    openai_env.script({"score": 1, "rationale": "ok"})
    grader = make({"kind": "model_judge", "prompt": "Judge {submission}"}, tmp_path)
    assert (type(grader).__name__, grade(grader).score) == ("RubricGrader", 1.0)


def test_default_fake_judge_scores_containment_of_ground_truth(openai_env, tmp_path):  # noqa: F811
    grader = make({"prompt": "Is it right?"}, tmp_path)
    assert grade(grader, submission="It is Paris.").score == 1.0
    assert grade(grader, submission="It is Lyon.").score == 0.0


# --- scores, clamping, bad replies ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "score", "raw"),
    [
        ({"score": 1.7, "rationale": "r"}, 1.0, [1.7]),
        ({"score": -0.2, "rationale": "r"}, 0.0, [-0.2]),
        ({"score": "0.25", "rationale": "r"}, 0.25, None),
        ({"score": 0, "rationale": "r"}, 0.0, None),
    ],
)
def test_score_is_clamped_to_unit_interval(openai_env, tmp_path, reply, score, raw):  # noqa: F811
    openai_env.script(reply)
    g = grade(make({"prompt": "Judge {submission}"}, tmp_path))
    assert (g.score, g.error, g.metadata.get("raw_scores")) == (score, None, raw)


def test_fenced_json_reply_is_accepted(openai_env, tmp_path):  # noqa: F811
    openai_env.script('```json\n{"score": 0.75, "rationale": "fine"}\n```')
    g = grade(make({"prompt": "Judge {submission}"}, tmp_path))
    assert (g.score, g.rationale, g.error) == (0.75, "fine", None)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("I think it deserves 0.8", "judge reply is not a JSON object: 'I think it deserves 0.8'"),
        ({"rationale": "good"}, "judge reply has no 'score' (keys: rationale)"),
        ({"score": 0.8}, "judge reply has no 'rationale' (keys: score)"),
        ({"score": "high", "rationale": "r"}, "judge reply 'score' is not a number: 'high'"),
        ({"score": True, "rationale": "r"}, "judge reply 'score' is not a number: True"),
        ({"score": None, "rationale": "r"}, "judge reply has no 'score' (keys: score, rationale)"),
    ],
)
def test_unusable_reply_is_an_error_grade(openai_env, tmp_path, reply, error):  # noqa: F811
    openai_env.script(reply)
    g = grade(make({"prompt": "Judge {submission}"}, tmp_path))
    assert (g.score, g.error, g.rationale) == (0.0, error, f"Error during grading: {error}")
    assert (
        g.metadata["error"],
        g.metadata["model"],
        g.metadata["retries"],
        openai_env.count(),
    ) == (error, "gpt-4o-mini", 0, 1)
    assert g.metadata["usage"]["prompt_tokens"] > 0


# --- retries and timeouts -----------------------------------------------------------------------


def test_429_with_retry_after_then_success(openai_env, tmp_path):  # noqa: F811
    openai_env.fault("429", first=1, retry_after="1")
    openai_env.script({"score": 0.9, "rationale": "good"})
    g = grade(make({"prompt": "Judge {submission}"}, tmp_path))
    assert (
        g.score,
        g.error,
        g.metadata["retries"],
        g.metadata["throttled"],
        openai_env.count(),
    ) == (0.9, None, 0, 1, 2)
    first, second = openai_env.requests
    assert second.at - first.at >= 0.95


def test_500s_then_success_counts_retries(openai_env, tmp_path):  # noqa: F811
    openai_env.fault("500", first=3)
    openai_env.script({"score": 0.4, "rationale": "meh"})
    g = grade(make({"prompt": "Judge {submission}"}, tmp_path))
    assert (g.score, g.metadata["retries"], openai_env.count()) == (0.4, 3, 4)


def test_exhausted_retries_are_an_error_grade(openai_env, tmp_path):  # noqa: F811
    openai_env.fault("500")
    g = grade(make({"prompt": "Judge {submission}", "max_retries": 2}, tmp_path))
    error = f"{openai_env.url}/chat/completions: HTTP 500: injected 500 (after 2 retries)"
    assert (g.score, g.error, g.rationale) == (0.0, error, f"Error during grading: {error}")
    assert g.metadata == {
        "error": error,
        "model": "gpt-4o-mini",
        "cache_hits": 0,
        "retries": 2,
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
        "cost_usd": 0.0,  # a failed call spent nothing known
    }
    assert openai_env.count() == 3


def test_timeout_is_an_error_grade(openai_env, tmp_path):  # noqa: F811
    openai_env.fault("hang")
    g = grade(make({"prompt": "Judge {submission}", "timeout": 0.2, "max_retries": 0}, tmp_path))
    assert g.error == f"{openai_env.url}/chat/completions: timed out after 0.2 s"
    assert g.score == 0.0


# --- temperature --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "temperature", "sent"),
    [
        ("gpt-4o-mini", None, 0.0),
        ("gpt-4o", 0.3, 0.3),
        ("o1", None, 1.0),
        ("o3-mini", 0.0, 1.0),
        ("o4-mini", None, 1.0),
        ("gpt-5-mini", 0.0, 1.0),
    ],
)
def test_reasoning_models_get_temperature_one(openai_env, tmp_path, model, temperature, sent):  # noqa: F811
    raw = {"prompt": "Judge {submission}", "model": model}
    if temperature is not None:
        raw["temperature"] = temperature
    grade(make(raw, tmp_path))
    (body,) = openai_env.bodies()
    assert (body["model"], body["temperature"]) == (model, sent)


# --- placeholders and rubric variables ----------------------------------------------------------


def test_rubric_vars_fill_and_other_braces_stay(openai_env, tmp_path):  # noqa: F811
    prompt = 'Topic: {topic}. Max {max_words} words. Reply like {"score": 1}. Keep {unknown}. {submission}'
    sample = Sample(id=7, input="q", rubric_vars={"topic": "bees", "max_words": 50})
    grade(
        make({"prompt": prompt, "rubric_vars": ["topic", "max_words"]}, tmp_path),
        sample,
        "Bees {buzz}.",
    )
    user = openai_env.bodies()[0]["messages"][1]["content"]
    assert (
        'Topic: bees. Max 50 words. Reply like {"score": 1}. Keep {unknown}. Bees {buzz}.' in user
    )


def test_item_templates_render_in_the_rubric(openai_env, tmp_path):  # noqa: F811
    sample = Sample(id=3, input="q", metadata={"topic": "tax"}, extra_vars={"audience": "kids"})
    traj = Trajectory(
        turns=[[Message("assistant", "done", [ToolCall("c1", "lookup", '{"q": 1}')])]]
    )
    prompt = "For {{ item.audience }} on {{ item.metadata.topic }}; tool {{ sample.output_tools[0].function.name }}."
    grade(make({"prompt": prompt}, tmp_path), sample, "done", traj)
    assert "For kids on tax; tool lookup." in openai_env.bodies()[0]["messages"][1]["content"]


def test_missing_item_template_variable_is_an_error_grade(openai_env, tmp_path):  # noqa: F811
    g = grade(make({"prompt": "For {{ item.audience }}"}, tmp_path))
    assert (g.score, g.error, openai_env.count()) == (
        0.0,
        "template variable {{ item.audience }} is missing ('audience' not found)",
        0,
    )


def test_the_loader_builds_samples_only_for_a_grader_with_something_to_check(tmp_path, monkeypatch):
    from ci_evals.config import dataset as dataset_mod
    from ci_evals.suite.loader import load_suite

    built = []

    class Counted(Sample):
        def __init__(self, **fields):
            built.append(fields["id"])
            super().__init__(**fields)

    monkeypatch.setattr(dataset_mod, "Sample", Counted)
    (tmp_path / "data.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "input": "q", "rubric_vars": {"topic": "t"}}) + "\n"
            for i in range(5)
        )
    )
    cases = [
        ({"prompt": "Is {submission} right for {input}?"}, False),  # wrapped, nothing declared
        ({"prompt": "{topic}: {submission}", "rubric_vars": ["topic"]}, True),
        ({"prompt": "{submission}", "rubric_mode": "verbatim"}, True),
    ]
    for extra, checks in cases:
        built.clear()
        suite = {
            "name": "s",
            "dataset": "data.jsonl",
            "target": {"kind": "model", "model": "gpt-4o-mini"},
            "graders": {"quality": {"kind": "rubric", "model": "gpt-4o-mini", **extra}},
        }
        (tmp_path / "suite.yaml").write_text(json.dumps(suite))
        loaded = load_suite(tmp_path / "suite.yaml")
        assert (loaded.graders["quality"].grader.checks_samples(), built) == (
            checks,
            list(range(5)) if checks else [],
        )
        assert loaded.dataset.count == 5


def test_sample_missing_a_rubric_var_fails_before_anything_runs(tmp_path):
    grader = make({"prompt": "{topic} {tone}", "rubric_vars": ["topic", "tone"]}, tmp_path)
    ok = Sample(id=1, input="q", rubric_vars={"topic": "a", "tone": "b"})
    with pytest.raises(ConfigError) as info:
        grader.check_samples([ok, Sample(id=2, input="q", rubric_vars={"topic": "a"})])
    assert (
        str(info.value)
        == "graders.quality.rubric_vars: sample 2 is missing rubric variable 'tone' required by grader 'quality'"
    )
    with pytest.raises(ConfigError) as info:
        grader.check_samples([Sample(id="x", input="q")])
    assert (
        info.value.message
        == "sample x is missing rubric variable 'topic', 'tone' required by grader 'quality'"
    )


def test_rubric_var_clashing_with_a_placeholder_is_rejected(tmp_path):
    with pytest.raises(ConfigError) as info:
        make({"prompt": "{input}", "rubric_vars": ["input"]}, tmp_path)
    assert (
        info.value.message
        == "rubric variable 'input' clashes with a built-in placeholder (input, submission, ground_truth)"
    )


def test_multi_turn_input_is_shown_one_turn_per_line(openai_env, tmp_path):  # noqa: F811
    sample = Sample(id=1, input=["Hi, I'm Ana.", "What's my name?"])
    grade(make({"prompt": "Q: {input}"}, tmp_path), sample, "Ana")
    user = openai_env.bodies()[0]["messages"][1]["content"]
    assert "Q: Hi, I'm Ana.\nWhat's my name?" in user
    assert "## Original Question Given to the Agent\nHi, I'm Ana.\nWhat's my name?\n" in user


def test_build_judge_prompt_for_agent_judges_asks_for_the_tool():
    text = build_judge_prompt("R", CAPITAL, "S", tool_name="submit_grade")
    assert text.endswith(
        "4. Use the submit_grade tool to submit your evaluation with:\n"
        "   - score: a float between 0.0 and 1.0\n   - rationale: your reasoning for the score\n\n"
        "Do NOT respond with text - you MUST call the submit_grade tool to complete the evaluation."
    )


# --- judge_samples and cache --------------------------------------------------------------------


def test_judge_samples_average_and_report_spread(openai_env, tmp_path):  # noqa: F811
    openai_env.script(*({"score": s, "rationale": f"r{s}"} for s in (0.6, 0.8, 1.0)))
    g = grade(make({"prompt": "Judge {submission}", "judge_samples": 3}, tmp_path))
    assert g.score == pytest.approx(0.8)
    assert (g.rationale, g.metadata["judge_scores"], openai_env.count()) == (
        "r0.6",
        [0.6, 0.8, 1.0],
        3,
    )
    assert g.metadata["judge_spread"] == pytest.approx(0.4)
    assert g.metadata["judge_stdev"] == pytest.approx(0.1632993, abs=1e-6)


def test_regrading_hits_the_cache_for_every_judge_call(openai_env, tmp_path):  # noqa: F811
    raw = {"prompt": "Judge {submission}", "judge_samples": 2}
    first = grade(make(raw, tmp_path, cache=True))
    second = grade(make(raw, tmp_path, cache=True))
    assert openai_env.count() == 2
    assert (second.score, second.metadata["cache_hits"], second.metadata["usage"]) == (
        first.score,
        2,
        {"prompt_tokens": 0, "completion_tokens": 0},
    )


def test_runs_of_a_repeated_sample_are_judged_independently(openai_env, tmp_path):  # noqa: F811
    grader = make({"prompt": "Judge {submission}"}, tmp_path, cache=True)
    for run in (0, 1, 0):
        traj = Trajectory.from_text("Paris")
        traj.metadata["run"] = run
        grade(grader, submission="Paris", trajectory=traj)
    assert openai_env.count() == 2


# --- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"prompt": "a", "prompt_path": "b.txt"},
            "graders.quality: give exactly one of 'prompt' or 'prompt_path' (both given)",
        ),
        ({}, "graders.quality: give exactly one of 'prompt' or 'prompt_path' (neither given)"),
        (
            {"prompt": "a", "provider": "opnai"},
            "graders.quality.provider: unknown provider 'opnai' (did you mean 'openai'?)",
        ),
        (
            {"prompt": "a", "modle": "gpt-4o"},
            "graders.quality.modle: unknown key 'modle' (did you mean 'model'?)",
        ),
        (
            {"prompt": "a", "judge_samples": 0},
            "graders.quality.judge_samples: Input should be greater than or equal to 1 (got 0)",
        ),
        ({"prompt": "   "}, "graders.quality.prompt: the rubric is empty"),
    ],
)
def test_invalid_specs_are_config_errors(tmp_path, raw, message):
    with pytest.raises(ConfigError) as info:
        make(raw, tmp_path)
    assert str(info.value) == message


def test_missing_prompt_file_is_named(tmp_path):
    with pytest.raises(ConfigError) as info:
        make({"prompt_path": "rubrics/missing.txt"}, tmp_path)
    assert (
        str(info.value)
        == f"graders.quality.prompt_path: cannot read rubric {tmp_path / 'rubrics/missing.txt'}: file not found"
    )


def test_agent_file_selects_the_agent_judge():
    from ci_evals.graders.letta_judge import LettaJudgeGrader

    assert (
        RubricGrader.resolve({"kind": "rubric", "agent_file": "judge.af", "prompt": "x"})
        is LettaJudgeGrader
    )
    assert RubricGrader.resolve({"kind": "rubric", "prompt": "x"}) is RubricGrader


def test_offline_construction_needs_no_key_and_opens_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    grader = make({"prompt": "Judge {submission}"}, tmp_path, offline=True)
    assert grader.llm._client is None
    with pytest.raises(ConfigError) as info:
        asyncio.run(grader.start())
    assert str(info.value).startswith("graders.quality: OPENAI_API_KEY is not set")


def test_grader_base_url_and_key_env_override_the_environment(openai_server, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("JUDGE_KEY", "judge-key-42")
    grade(
        make(
            {"prompt": "J {submission}", "base_url": openai_server.url, "api_key_env": "JUDGE_KEY"},
            tmp_path,
        )
    )
    assert openai_server.requests[0].headers["authorization"] == "Bearer judge-key-42"


# --- the examples/rubric suite through the CLI --------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "rubric"
ANSWERS = json.loads((EXAMPLE / "fake_answers.json").read_text())


def run_example(tmp_path, monkeypatch, server: FakeOpenAI, out: str = "out") -> tuple[int, dict]:
    """Copy examples/rubric into tmp_path and run it with the CLI against ``server``."""
    from ci_evals.cli.app import main

    suite_dir = tmp_path / "suite"
    if not suite_dir.exists():
        shutil.copytree(EXAMPLE, suite_dir)
    monkeypatch.chdir(tmp_path)  # the default cache folder .ci-evals-cache/ lands here
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-key-123456")
    rc = main(["run", str(suite_dir / "suite.yaml"), "--output", str(tmp_path / out), "-q"])
    return rc, json.loads((tmp_path / out / "summary.json").read_text())


def test_example_suite_passes_its_rubric_gate(tmp_path, monkeypatch):
    with FakeOpenAI(answers=ANSWERS) as server:
        rc, summary = run_example(tmp_path, monkeypatch, server)
        assert server.count() == 8  # 4 target calls + 4 judge calls
    gate = summary["gates"][0]
    assert (rc, summary["gate"]["passed"], gate["actual"], gate["description"]) == (
        0,
        True,
        1.0,
        "quality avg_score gte 0.75",
    )
    assert summary["metrics"]["quality"]["mean"] == 1.0
    assert summary["errors"]["total"] == 0
    assert summary["usage"]["graders"]["quality"]["prompt_tokens"] > 0
    assert summary["usage"]["target"]["prompt_tokens"] > 0
    assert (summary["cache"]["hits"], summary["retries"]) == (0, 0)
    # The example prices gpt-4o-mini at $0.15 / $0.60 per million tokens, target and judge alike.
    total = summary["usage"]["total"]
    expected = (total["prompt_tokens"] * 0.15 + total["completion_tokens"] * 0.60) / 1e6
    assert summary["usage"]["cost_usd"] == round(expected, 6)


def test_example_suite_fails_its_gate_when_half_the_answers_are_wrong(tmp_path, monkeypatch):
    wrong = dict(
        ANSWERS,
        **{
            "How many legs does a spider have?": "Six.",
            "Which planet is known as the Red Planet?": "Venus.",
        },
    )
    with FakeOpenAI(answers=wrong) as server:
        rc, summary = run_example(tmp_path, monkeypatch, server)
    assert (rc, summary["gate"]["passed"], summary["gates"][0]["actual"]) == (1, False, 0.5)


def test_example_suite_judge_outage_counts_errors_not_low_scores(tmp_path, monkeypatch):
    def respond(req):
        return Fault("500") if json_mode(req) else ANSWERS[last_user(req)]

    with FakeOpenAI(respond) as server:
        rc, summary = run_example(tmp_path, monkeypatch, server)
        assert server.count() == 4 + 4 * 6  # each judge call: 1 try + 5 retries
    assert (
        rc,
        summary["gate"]["passed"],
        summary["verdict"],
        summary["errors"]["by_category"],
    ) == (1, False, "errored", {"target": 0, "extraction": 0, "grading": 4})
    assert [g["count"] for g in summary["errors"]["groups"]] == [4]
    assert summary["retries"] == 20


def test_rerunning_the_example_suite_hits_the_cache_for_every_call(tmp_path, monkeypatch):
    with FakeOpenAI(answers=ANSWERS) as server:
        run_example(tmp_path, monkeypatch, server, out="first")
        assert server.count() == 8
        rc, summary = run_example(tmp_path, monkeypatch, server, out="second")
        assert server.count() == 8  # no new requests at all
    assert (rc, summary["cache"]["hits"], summary["gate"]["passed"]) == (0, 8, True)
    assert summary["usage"]["total"] == {"prompt_tokens": 0, "completion_tokens": 0}
