"""The Letta agent-as-judge grader, through the real letta-client against the local fake server."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from ci_evals._util import retry
from ci_evals._util.errors import ConfigError
from ci_evals.config.specs import Context
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.base import build_grader
from ci_evals.graders.letta_judge import LettaJudgeGrader, LettaJudgeSpec
from ci_evals.letta import retries as letta_retries
from tests.fakes.backoff import watch_letta_backoff
from tests.fakes.letta_server import (  # noqa: F401 - letta_fake_fixture provides `letta_fake`
    SUBMIT_GRADE,
    FakeLetta,
    agent_file,
    assistant,
    letta_fake_fixture,
    tool_call,
    write_agent_file,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "letta" / "agent-judge"
FETCH = "def fetch_webpage(url: str) -> str:\n    return url\n"
SEARCH = "def search_documents(query: str) -> str:\n    return query\n"


@pytest.fixture(autouse=True)
def _no_import_backoff(monkeypatch):
    """Retried imports wait 0 s here (the backoff itself is tested in test_letta_agents.py)."""
    monkeypatch.setattr(letta_retries, "IMPORT_BACKOFF", 0.0)


def judge_file(tmp_path: Path, *tools: str, name: str = "judge.af", **kw) -> str:
    write_agent_file(
        tmp_path / name, agent_file("judge", tools=list(tools or [SUBMIT_GRADE]), **kw)
    )
    return name


def make(tmp_path: Path, fake: FakeLetta | None = None, **raw) -> LettaJudgeGrader:
    raw = {"kind": "rubric", "prompt": "Grade it.", **raw}
    if "agent_file" not in raw and raw["kind"] == "rubric":
        raw["agent_file"] = judge_file(tmp_path)
    if fake is not None:
        raw["base_url"] = fake.url
    return LettaJudgeGrader("agent_judge", LettaJudgeSpec.model_validate(raw), Context(tmp_path))


def grade(judge: LettaJudgeGrader, submission: str, sample: Sample | None = None) -> GradeResult:
    sample = sample or Sample(id=0, input="What is 2+2?", ground_truth="4")

    async def go():
        await judge.start()
        try:
            return await judge.grade(sample, submission, Trajectory.from_text(submission))
        finally:
            await judge.aclose()

    return asyncio.run(go())


def config_error(tmp_path: Path, **raw) -> str:
    with pytest.raises(ConfigError) as err:
        make(tmp_path, **raw)
    return err.value.message


# -- validation before anything runs (offline) ------------------------------------------------------


def test_a_missing_judge_tool_fails_with_the_seed_message(tmp_path):
    af = judge_file(tmp_path, FETCH, SEARCH)
    assert config_error(tmp_path, agent_file=af) == (
        "Judge tool 'submit_grade' not found in agent file judge.af. "
        "Available tools: ['fetch_webpage', 'search_documents']"
    )


def test_a_judge_tool_must_take_score_float_and_rationale_str(tmp_path):
    af = judge_file(tmp_path, "def submit_grade(score: int, notes: str) -> str:\n    return ''\n")
    assert config_error(tmp_path, agent_file=af) == (
        "Judge tool 'submit_grade' in agent file judge.af must take parameters score: float and "
        "rationale: str; it takes (score: int, notes: str)"
    )


def test_the_json_schema_is_checked_too(tmp_path):
    doc = agent_file("judge", tools=[SUBMIT_GRADE])
    doc["tools"][0]["json_schema"]["parameters"]["properties"]["score"]["type"] = "integer"
    write_agent_file(tmp_path / "judge.af", doc)
    assert config_error(tmp_path, agent_file="judge.af") == (
        "Judge tool 'submit_grade' in agent file judge.af must take parameters score: float and "
        "rationale: str; it takes (score: int, rationale: str)"
    )


def test_a_judge_tool_must_be_attached_and_callable(tmp_path):
    doc = agent_file("judge", tools=[SUBMIT_GRADE])
    doc["agents"][0]["tool_ids"] = []
    write_agent_file(tmp_path / "detached.af", doc)
    assert config_error(tmp_path, agent_file="detached.af") == (
        "Judge tool 'submit_grade' is in agent file detached.af but not attached to its agent "
        "(its id 'tool-0' is not in the agent's tool_ids)"
    )
    af = judge_file(
        tmp_path,
        name="approval.af",
        tool_rules=[{"type": "requires_approval", "tool_name": "submit_grade"}],
    )
    assert config_error(tmp_path, agent_file=af) == (
        "Judge tool 'submit_grade' in agent file approval.af requires approval, so the judge could never "
        "submit a grade"
    )


def test_a_judge_tool_with_nothing_to_check_is_rejected(tmp_path):
    doc = agent_file("judge", tools=[SUBMIT_GRADE])
    doc["tools"][0].update(source_code=None, json_schema=None)
    write_agent_file(tmp_path / "judge.af", doc)
    assert config_error(tmp_path, agent_file="judge.af") == (
        "Judge tool 'submit_grade' in agent file judge.af has neither source code defining submit_grade() "
        "nor a JSON schema, so its parameters cannot be checked"
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"agent_file": "nope.af"}, "agent file not found: {tmp}/nope.af"),
        ({"agent_file": "judge.json"}, "agent file must have the .af extension: judge.json"),
        (
            {"prompt_path": "missing.txt", "prompt": None},
            "cannot read rubric {tmp}/missing.txt: file not found",
        ),
        (
            {"rubric_vars": ["submission"]},
            "rubric variable 'submission' clashes with a built-in placeholder (input, submission, ground_truth)",
        ),
        (
            {"model": "gpt-4o-mini"},
            "model on an agent judge is a Letta model handle like 'openai/gpt-4o-mini', got 'gpt-4o-mini'",
        ),
        (
            {"kind": "letta_judge", "judge_tool_name": "grade"},
            "judge_tool_name can only be changed together with agent_file: the built-in judge's tool is submit_grade",
        ),
    ],
)
def test_invalid_judges_fail_at_construction(tmp_path, raw, message):
    assert config_error(tmp_path, **raw) == message.format(tmp=tmp_path)


def test_prompt_and_prompt_path_are_exclusive(tmp_path):
    with pytest.raises(
        ValueError, match=r"give exactly one of 'prompt' or 'prompt_path' \(both given\)"
    ):
        LettaJudgeSpec.model_validate(
            {"kind": "rubric", "prompt": "a", "prompt_path": "b", "agent_file": "j.af"}
        )


def test_letta_judge_without_agent_file_uses_the_built_in_judge(tmp_path):
    judge = make(tmp_path, kind="letta_judge")
    assert judge.agent_file.ref == "built-in letta_judge.af"
    assert [t["name"] for t in judge.agent_file.tools] == ["submit_grade"]


def test_kind_rubric_with_agent_file_resolves_to_the_agent_judge(tmp_path):
    af = judge_file(tmp_path)
    ctx = Context(tmp_path)
    judge = build_grader("agent_judge", {"kind": "rubric", "agent_file": af, "prompt": "x"}, ctx)
    assert type(judge) is LettaJudgeGrader
    assert (
        type(build_grader("j", {"kind": "letta_judge", "agent_file": af, "prompt": "x"}, ctx))
        is LettaJudgeGrader
    )


def test_check_samples_requires_the_declared_rubric_vars(tmp_path):
    judge = make(tmp_path, rubric_vars=["country"], prompt="About {country}.")
    judge.check_samples([Sample(id=0, input="q", rubric_vars={"country": "Peru"})])
    with pytest.raises(ConfigError) as err:
        judge.check_samples(
            [Sample(id=0, input="q", rubric_vars={"country": "Peru"}), Sample(id=1, input="q")]
        )
    assert (
        err.value.message
        == "sample 1 is missing rubric variable 'country' required by grader 'agent_judge'"
    )
    assert (judge.checks_samples(), make(tmp_path, prompt="Fine?").checks_samples()) == (
        True,
        False,
    )


# -- grading --------------------------------------------------------------------------------------


def test_the_judge_tool_call_is_the_grade_and_the_judge_is_deleted(letta_fake, tmp_path):
    judge = make(
        tmp_path, letta_fake, prompt="Country: {country}. Input: {input}", rubric_vars=["country"]
    )
    sample = Sample(id=0, input="q?", ground_truth="4", rubric_vars={"country": "Peru"})
    result = grade(judge, "it is score=0.8", sample)
    judge_id = letta_fake.created[0]
    assert result == GradeResult(
        score=0.8,
        rationale="found score=0.8",
        metadata={
            "agent_file": "judge.af",
            "usage": {"prompt_tokens": 20, "completion_tokens": 10},
            "cache_hits": 0,
            "retries": 0,
            "judge_agent_id": judge_id,
            "cost_usd": pytest.approx((20 * 0.15 + 10 * 0.6) / 1e6, rel=1e-12),  # genai-prices
        },
    )
    [(agent, prompt)] = letta_fake.sent
    assert agent == judge_id and prompt == judge.build_prompt(sample, "it is score=0.8")
    assert "## Evaluation Rubric\nCountry: Peru. Input: q?\n" in prompt
    assert prompt.endswith(
        "Do NOT respond with text - you MUST call the submit_grade tool to complete the evaluation."
    )
    assert letta_fake.deleted == [judge_id] and letta_fake.live() == []


@pytest.mark.parametrize(("raw", "score"), [(1.7, 1.0), (-0.5, 0.0)])
def test_scores_are_clamped(letta_fake, tmp_path, raw, score):
    result = grade(make(tmp_path, letta_fake), f"score={raw}")
    assert (result.score, result.metadata["raw_score"], result.error) == (score, raw, None)


def test_a_custom_judge_tool_name_is_called(letta_fake, tmp_path):
    af = judge_file(tmp_path, SUBMIT_GRADE.replace("submit_grade", "grade"))
    judge = make(tmp_path, letta_fake, agent_file=af, judge_tool_name="grade")
    assert grade(judge, "score=0.25").score == 0.25
    assert "Use the grade tool" in letta_fake.sent[0][1]


def test_a_judge_that_never_calls_the_tool_scores_zero_with_an_error(letta_fake, tmp_path):
    letta_fake.behaviours["judge"] = lambda fake, agent, text: [assistant("Looks right to me.")]
    result = grade(make(tmp_path, letta_fake), "4")
    assert (result.score, result.rationale, result.error) == (
        0.0,
        "Looks right to me.",
        "the judge agent did not call the submit_grade tool",
    )
    assert letta_fake.live() == []


def test_a_failed_judge_run_says_why(letta_fake, tmp_path):
    letta_fake.behaviours["judge"] = lambda fake, agent, text: []
    letta_fake.stop_reason = "llm_api_error"
    result = grade(make(tmp_path, letta_fake), "4")
    assert (
        result.error
        == "the judge agent did not call the submit_grade tool (the run stopped with 'llm_api_error')"
    )


def test_a_non_numeric_score_is_an_error(letta_fake, tmp_path):
    letta_fake.judge_rule = lambda text: ("high", "meh")
    result = grade(make(tmp_path, letta_fake), "4")
    assert (result.score, result.rationale, result.error) == (
        0.0,
        "meh",
        "the judge called submit_grade without a numeric score (score='high')",
    )


def test_arguments_that_are_not_json_are_an_error(letta_fake, tmp_path):
    letta_fake.behaviours["judge"] = lambda fake, agent, text: [
        tool_call("submit_grade", "score: 1", "c1")
    ]
    result = grade(make(tmp_path, letta_fake), "4")
    assert (
        result.error
        == "the judge called submit_grade with arguments that are not a JSON object: score: 1"
    )


def test_an_import_failure_is_an_error_grade_after_the_retries(letta_fake, tmp_path):
    letta_fake.fail("POST", "/v1/agents/import", status=500, times=100)
    result = grade(make(tmp_path, letta_fake, api_key="sk-judge-secret"), "4")
    assert (result.score, result.error) == (
        0.0,
        "Letta judge failed: Letta returned HTTP 500 for POST /v1/agents/import: injected fault",
    )
    assert result.metadata["retries"] == 5  # the import's own retries; no fresh judge after them
    assert letta_fake.count("POST", "/v1/agents/import") == 6
    assert "sk-judge-secret" not in result.model_dump_json()
    assert letta_fake.created == []


def test_a_client_error_on_import_is_not_retried(letta_fake, tmp_path):
    letta_fake.fail("POST", "/v1/agents/import", status=422, detail="bad file")
    result = grade(make(tmp_path, letta_fake), "4")
    assert (
        result.error
        == "Letta judge failed: Letta returned HTTP 422 for POST /v1/agents/import: bad file"
    )
    assert (result.metadata["retries"], letta_fake.count("POST", "/v1/agents/import")) == (0, 1)


def test_a_deadlocked_import_is_retried_and_counted(letta_fake, tmp_path):
    letta_fake.deadlock_imports(times=2)
    result = grade(make(tmp_path, letta_fake), "4")
    assert (result.score, result.error, result.metadata["retries"]) == (1.0, None, 2)
    assert letta_fake.count("POST", "/v1/agents/import") == 3
    assert letta_fake.live() == []


def test_the_judge_is_deleted_when_its_run_fails(letta_fake, tmp_path):
    letta_fake.fail("POST", r"/v1/agents/[^/]+/messages", status=502, times=3)
    result = grade(make(tmp_path, letta_fake, retry_backoff=0), "4")
    judge_id = letta_fake.created[-1]
    assert (
        result.error
        == f"Letta judge failed: Letta returned HTTP 502 for POST /v1/agents/{judge_id}/messages: injected fault"
    )
    assert (result.metadata["retries"], len(letta_fake.created)) == (
        2,
        3,
    )  # a fresh judge per attempt
    assert letta_fake.live() == []


def test_a_judge_whose_messages_fail_once_is_retried_with_a_fresh_judge(letta_fake, tmp_path):
    letta_fake.fail("POST", r"/v1/agents/[^/]+/messages", status=502)
    result = grade(make(tmp_path, letta_fake, retry_backoff=0), "4")
    assert (result.score, result.error, result.metadata["retries"]) == (1.0, None, 1)
    assert result.metadata["judge_agent_id"] == letta_fake.created[1]
    assert letta_fake.live() == []


def test_judge_attempts_follow_the_shared_backoff_jittered_capped_and_bounded(
    letta_fake, tmp_path, monkeypatch
):
    watched = watch_letta_backoff(monkeypatch)
    monkeypatch.setattr(retry, "ATTEMPT_BACKOFF_CAP", 1.5)
    letta_fake.fail("POST", r"/v1/agents/[^/]+/messages", status=502, times=10)
    result = grade(make(tmp_path, letta_fake, max_retries=3, retry_backoff=1.0), "4")
    assert (result.error or "").startswith("Letta judge failed: Letta returned HTTP 502")
    assert (result.metadata["retries"], len(letta_fake.created)) == (3, 4)  # a fresh judge each
    assert watched.bounds() == [1.0, 1.5, 1.5]  # retry_backoff doubling, capped
    assert watched.slept == watched.rng.drawn  # each wait drawn from [bound / 2, bound]
    assert watched.slept != watched.bounds()  # jittered, not the bound itself
    assert letta_fake.live() == []


def test_a_judge_retry_waits_for_the_servers_retry_after(letta_fake, tmp_path, monkeypatch):
    watched = watch_letta_backoff(monkeypatch)
    letta_fake.fail("POST", r"/v1/agents/[^/]+/messages", status=503, headers={"Retry-After": "5"})
    result = grade(make(tmp_path, letta_fake, retry_backoff=1.0), "4")
    assert (result.score, result.error, result.metadata["retries"]) == (1.0, None, 1)
    assert (watched.bounds(), watched.slept) == ([1.0], [5.0])


def test_a_judge_af_without_its_system_message_fails_as_on_a_real_server(letta_fake, tmp_path):
    path = write_agent_file(
        tmp_path / "bare.af", agent_file("judge", tools=[SUBMIT_GRADE], with_messages=False)
    )
    result = grade(make(tmp_path, letta_fake, agent_file=str(path), max_retries=0), "4")
    judge_id = letta_fake.created[0]
    assert result.error == (
        f"Letta judge failed: Letta returned HTTP 500 for POST /v1/agents/{judge_id}/messages: "
        "An unknown error occurred"
    )
    assert letta_fake.live() == []


def test_a_missing_rubric_var_at_grade_time_is_an_error_grade(letta_fake, tmp_path):
    result = grade(make(tmp_path, letta_fake, prompt="{country}", rubric_vars=["country"]), "4")
    assert (result.score, result.error) == (0.0, "sample 0 has no rubric variable 'country'")
    assert letta_fake.created == []


def test_the_model_handle_is_applied_to_the_judge(letta_fake, tmp_path):
    grade(make(tmp_path, letta_fake, model="openai-proxy/gpt-4o-mini"), "score=1")
    assert letta_fake.imports == [
        {
            "override_name": "judge",
            "override_existing_tools": "false",
            "override_model_handle": "openai-proxy/gpt-4o-mini",
        }
    ]
    assert letta_fake.agents == {} and letta_fake.patches == []


def test_the_judge_replaces_server_tools_only_when_asked(letta_fake, tmp_path):
    grade(make(tmp_path, letta_fake, override_existing_tools=True), "score=1")
    assert letta_fake.imports == [{"override_name": "judge", "override_existing_tools": "true"}]


def test_the_built_in_judge_grades(letta_fake, tmp_path):
    result = grade(make(tmp_path, letta_fake, kind="letta_judge"), "score=0.5")
    assert (result.score, result.metadata["agent_file"]) == (0.5, "built-in letta_judge.af")


# -- the seed's agent-judge example through the CLI -------------------------------------------------


def _cli(args):
    from ci_evals.cli.app import main

    return main(args)


def test_the_example_validates_without_contacting_a_server(letta_fake, monkeypatch):
    monkeypatch.setenv("LETTA_BASE_URL", letta_fake.url)
    assert _cli(["validate", str(EXAMPLE / "suite.yaml")]) == 0
    assert letta_fake.requests == []


def test_validate_reports_a_bad_judge_file_with_the_seed_message(tmp_path, capsys):
    suite = tmp_path / "agent-judge"
    shutil.copytree(EXAMPLE, suite)
    doc = json.loads((suite / "judge.af").read_text())
    doc["tools"][0]["name"] = "fetch_webpage"
    (suite / "judge.af").write_text(json.dumps(doc))
    assert _cli(["validate", str(suite / "suite.yaml")]) == 2
    assert (
        "Judge tool 'submit_grade' not found in agent file judge.af. Available tools: ['fetch_webpage']"
        in capsys.readouterr().err
    )


def test_the_example_runs_against_the_fake_and_passes_its_gate(letta_fake, tmp_path, monkeypatch):
    monkeypatch.setenv("LETTA_BASE_URL", letta_fake.url)
    out = tmp_path / "out"
    rc = _cli(["run", str(EXAMPLE / "suite.yaml"), "--output", str(out)])
    summary = json.loads((out / "summary.json").read_text())
    rows = {
        r["sample_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())
    }
    assert rc == 0
    assert [(g["description"], g["actual"], g["passed"]) for g in summary["gates"]] == [
        ("agent_judge avg_score gte 0.75", 0.8, True)
    ]
    assert {k: v["mean"] for k, v in summary["metrics"].items()} == {
        "answer_contains": 0.8,
        "agent_judge": 0.8,
    }
    assert rows["australia"]["grades"]["agent_judge"]["score"] == 0.0
    assert rows["australia"]["submission"]["agent_judge"] == "The capital of Australia is Sydney."
    assert len(letta_fake.created) == 10  # 5 target agents + 5 judges
    assert letta_fake.live() == []


def test_the_example_fails_its_gate_when_the_judge_is_harsh(letta_fake, tmp_path, monkeypatch):
    monkeypatch.setenv("LETTA_BASE_URL", letta_fake.url)
    letta_fake.judge_rule = lambda text: (0.5, "half right")
    out = tmp_path / "out"
    assert _cli(["run", str(EXAMPLE / "suite.yaml"), "--output", str(out)]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert [(g["actual"], g["passed"]) for g in summary["gates"]] == [(0.5, False)]
    assert letta_fake.live() == []


def test_an_unreachable_judge_server_trips_the_breaker_and_later_samples_are_not_sent(
    tmp_path, capsys
):
    fake = FakeLetta()
    fake.url = "http://127.0.0.1:9"  # discard port: nothing listens
    judge = make(tmp_path, fake)
    cause = "cannot reach the Letta server at http://127.0.0.1:9: nothing listens there (connection refused)"

    async def go():
        await judge.start()
        try:
            return [
                await judge.grade(
                    Sample(id=i, input="q", ground_truth="4"), "4", Trajectory.from_text("4")
                )
                for i in range(5)
            ]
        finally:
            await judge.aclose()

    results = asyncio.run(go())
    stop = (
        f"stopped calling the Letta server at http://127.0.0.1:9: {cause} "
        "(is the Letta server running? check base_url / LETTA_BASE_URL)"
    )
    assert [(r.score, r.error, r.metadata["retries"]) for r in results] == [
        (0.0, f"Letta judge failed: {cause}", 5)
    ] * 3 + [(0.0, f"not sent: {stop}", 0)] * 2
    # 5: the import's own retries of a dropped connection (letta.agents); no fresh judge after them
    assert capsys.readouterr().err == f"error: {stop}\n"


def test_a_judge_server_that_answered_once_is_not_stopped_by_later_failures(letta_fake, tmp_path):
    judge = make(tmp_path, letta_fake)

    async def go():
        await judge.start()
        try:
            first = await judge.grade(
                Sample(id=0, input="q", ground_truth="4"), "4", Trajectory.from_text("4")
            )
            letta_fake.fail("POST", "/v1/agents/import", status=404, detail="gone", times=100)
            rest = [
                await judge.grade(
                    Sample(id=i, input="q", ground_truth="4"), "4", Trajectory.from_text("4")
                )
                for i in range(1, 5)
            ]
            return first, rest
        finally:
            await judge.aclose()

    first, rest = asyncio.run(go())
    assert (first.score, first.error) == (1.0, None)
    assert [r.error for r in rest] == [
        "Letta judge failed: Letta returned HTTP 404 for POST /v1/agents/import: gone"
    ] * 4
    assert letta_fake.count("POST", "/v1/agents/import") == 5
