"""``judge_repeats: K``: every LLM judge asked K times per sample (the target once), over real HTTP.

Suites run through the CLI against the fake OpenAI server; the Letta judge against the fake Letta.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import ci_evals.llm.client as llm_client
from ci_evals.config.specs import Context
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.base import build_grader
from tests.fakes.letta_server import (  # noqa: F401 - letta_fake_fixture provides `letta_fake`
    SUBMIT_GRADE,
    agent_file,
    letta_fake_fixture,
    write_agent_file,
)
from tests.fakes.openai_server import FakeOpenAI, Fault, json_mode, last_user

QUESTIONS = {"What is 2+2?": "4", "Capital of France?": "Paris", "Colour of the sky?": "Blue"}
RUBRIC = {"kind": "rubric", "prompt": "Is {submission} right for {input}?"}
SCORE_MODEL = {
    "kind": "score_model",
    "input": [{"role": "user", "content": "Grade {{ sample.output_text }}"}],
}
LABEL_MODEL = {
    "kind": "label_model",
    "labels": ["good", "bad"],
    "passing_labels": ["good"],
    "input": [{"role": "user", "content": "Label {{ sample.output_text }}"}],
}


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(llm_client, "BACKOFF_BASE", 0.01)


def judged(server: FakeOpenAI) -> int:
    return sum(json_mode(b) for b in server.bodies())


def asked(server: FakeOpenAI) -> int:
    return sum(not json_mode(b) for b in server.bodies())


def scripted_judge(*scores: float) -> Any:
    """A responder: the target answers QUESTIONS; judge calls get ``scores`` in turn (then repeat them)."""
    turn = itertools.cycle(scores)

    def respond(req: dict[str, Any]) -> Any:
        if not json_mode(req):
            return QUESTIONS.get(last_user(req).strip(), "?")
        s = next(turn)
        if isinstance(s, Fault):
            return s
        return {
            "score": s,
            "rationale": f"judged {s}",
            "result": s,
            "steps": [{"description": "d", "conclusion": "c"}],
        }

    return respond


def run(
    tmp_path: Path,
    monkeypatch,
    server: FakeOpenAI,
    grader: dict[str, Any],
    *,
    samples: int = 3,
    out: str = "out",
    gate: float = 0.5,
    extra: dict[str, Any] | None = None,
) -> tuple[int, dict, list[dict]]:
    """Write a suite (a model target, one grader ``quality``) and run it with the CLI."""
    from ci_evals.cli.app import main

    (tmp_path / "dataset.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "input": q, "ground_truth": a}) + "\n"
            for i, (q, a) in enumerate(list(QUESTIONS.items())[:samples])
        )
    )
    suite = {
        "name": "repeats",
        "dataset": "dataset.jsonl",
        "target": {"kind": "model", "model": "gpt-4o-mini"},
        "graders": {"quality": grader},
        "gate": {"metric_key": "quality", "metric": "avg_score", "op": "gte", "value": gate},
        "max_concurrent": 1,
        **(extra or {}),
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    monkeypatch.chdir(tmp_path)  # the response cache, .ci-evals-cache/, lands here
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-123456")
    rc = main(["run", str(tmp_path / "suite.yaml"), "--output", str(tmp_path / out), "-q"])
    summary = json.loads((tmp_path / out / "summary.json").read_text())
    records = [
        json.loads(line) for line in (tmp_path / out / "results.jsonl").read_text().splitlines()
    ]
    return rc, summary, sorted(records, key=lambda r: (r["sample_id"], r["run"]))


# --- calls and the reduction -------------------------------------------------------------------


@pytest.mark.parametrize(
    "grader", [RUBRIC, SCORE_MODEL, LABEL_MODEL], ids=["rubric", "score_model", "label_model"]
)
def test_k3_asks_the_judge_three_times_per_sample_and_the_target_once(
    tmp_path, monkeypatch, grader
):
    with FakeOpenAI(scripted_judge(1.0)) as server:
        if grader is LABEL_MODEL:
            server.responder = lambda req: (
                {"result": "good", "steps": []}
                if json_mode(req)
                else QUESTIONS[last_user(req).strip()]
            )
        rc, summary, records = run(tmp_path, monkeypatch, server, {**grader, "judge_repeats": 3})
        assert (asked(server), judged(server)) == (3, 9)
    assert rc == 0 and summary["metrics"]["quality"]["mean"] == 1.0
    for rec in records:
        assert rec["grades"]["quality"]["metadata"]["judge_repeats"]["scores"] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("grader", [RUBRIC, SCORE_MODEL], ids=["rubric", "score_model"])
def test_a_judge_answering_1_0_1_scores_two_thirds_and_lists_each_answer(
    tmp_path, monkeypatch, grader
):
    with FakeOpenAI(scripted_judge(1.0, 0.0, 1.0)) as server:
        rc, summary, [rec] = run(
            tmp_path, monkeypatch, server, {**grader, "judge_repeats": 3}, samples=1
        )
    g = rec["grades"]["quality"]
    assert g["score"] == pytest.approx(2 / 3) and g["passed"] is True and g["error"] is None
    assert g["metadata"]["judge_repeats"]["scores"] == [1.0, 0.0, 1.0]
    assert g["rationale"].endswith("(judged 3 times: scores 1, 0, 1)")
    assert summary["metrics"]["quality"]["mean"] == pytest.approx(2 / 3)


def test_the_usage_of_every_repeat_adds_up(tmp_path, monkeypatch):
    with FakeOpenAI(scripted_judge(1.0)) as server:
        *_, [one] = run(tmp_path, monkeypatch, server, RUBRIC, samples=1, out="one")
        *_, [three] = run(
            tmp_path, monkeypatch, server, {**RUBRIC, "judge_repeats": 3}, samples=1, out="three"
        )
    u1, u3 = (
        one["grades"]["quality"]["metadata"]["usage"],
        three["grades"]["quality"]["metadata"]["usage"],
    )
    # repeat 0 is the K=1 run's own call, from the cache (no tokens); repeats 1 and 2 are asked
    assert three["grades"]["quality"]["metadata"]["cache_hits"] == 1
    assert u3 == {k: 2 * v for k, v in u1.items()} and u1["prompt_tokens"] > 0


def test_each_repeat_is_marked_by_the_metrics_rule(tmp_path, monkeypatch):
    """The grader marks every repeat with its metric's rule, the one the runner applies to the mean."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-123456")
    with FakeOpenAI(scripted_judge(0.9, 0.2, 0.5)) as server:
        grader = build_grader(
            "quality",
            {**SCORE_MODEL, "judge_repeats": 3, "base_url": server.url},
            Context(tmp_path),
        )
        grader.rule = ("gte", 0.5)  # what the suite loader gives it: the metric's rule
        g = grade(grader, "4")
    assert g.metadata["judge_repeats"] == {"scores": [0.9, 0.2, 0.5], "passed": [True, False, True]}
    assert g.score == pytest.approx(1.6 / 3)


def test_each_repeats_pass_reaches_the_results_through_a_run(tmp_path, monkeypatch):
    with FakeOpenAI(scripted_judge(1.0, 0.0, 1.0)) as server:
        *_, [rec] = run(tmp_path, monkeypatch, server, {**RUBRIC, "judge_repeats": 3}, samples=1)
    assert rec["grades"]["quality"]["metadata"]["judge_repeats"]["passed"] == [True, False, True]


def test_k1_is_the_grader_as_before(tmp_path, monkeypatch):
    with FakeOpenAI(scripted_judge(1.0)) as server:
        *_, default = run(tmp_path, monkeypatch, server, RUBRIC, out="default")
        *_, one = run(tmp_path, monkeypatch, server, {**RUBRIC, "judge_repeats": 1}, out="one")
        assert (
            judged(server) == 3
        )  # the second run's judge calls all came from the cache: same keys
    for a, b in zip(default, one, strict=True):
        assert "judge_repeats" not in b["grades"]["quality"]["metadata"]
        assert (
            (a["grades"]["quality"]["score"], a["grades"]["quality"]["rationale"])
            == (b["grades"]["quality"]["score"], b["grades"]["quality"]["rationale"])
            == (1.0, "judged 1.0")
        )


# --- fail closed ---------------------------------------------------------------------------------


@pytest.mark.parametrize("grader", [RUBRIC, SCORE_MODEL], ids=["rubric", "score_model"])
def test_one_failed_repeat_errors_the_grade(tmp_path, monkeypatch, grader):
    with FakeOpenAI(scripted_judge(1.0, Fault("400"), 1.0)) as server:
        rc, summary, [rec] = run(
            tmp_path, monkeypatch, server, {**grader, "judge_repeats": 3}, samples=1
        )
        assert judged(server) == 2  # the first failure stops the repeats
    g = rec["grades"]["quality"]
    assert (g["score"], g["passed"], rc, summary["errors"]["by_category"]["grading"]) == (
        None,
        False,
        1,
        1,
    )
    assert "400" in g["error"] and "judge_repeats" not in g["metadata"]


def test_an_unusable_reply_in_one_repeat_errors_the_grade(tmp_path, monkeypatch):
    with FakeOpenAI(scripted_judge(1.0, 1.0, "not a number")) as server:
        *_, [rec] = run(tmp_path, monkeypatch, server, {**RUBRIC, "judge_repeats": 3}, samples=1)
    g = rec["grades"]["quality"]
    assert g["score"] is None and "score" in g["error"]


# --- the cache -----------------------------------------------------------------------------------


def test_the_cache_keeps_repeats_apart_and_a_rerun_asks_nothing(tmp_path, monkeypatch):
    with FakeOpenAI(scripted_judge(1.0, 0.0, 0.5, 0.0, 1.0, 1.0)) as server:
        _, _, first = run(
            tmp_path,
            monkeypatch,
            server,
            {**RUBRIC, "judge_repeats": 2},
            out="first",
            extra={"num_runs": 2},
        )
        assert (asked(server), judged(server)) == (6, 12)  # 3 samples x 2 runs, each judged twice
        _, summary, second = run(
            tmp_path,
            monkeypatch,
            server,
            {**RUBRIC, "judge_repeats": 2},
            out="second",
            extra={"num_runs": 2},
        )
        assert server.count() == 18  # nothing asked again
    scores = [r["grades"]["quality"]["metadata"]["judge_repeats"]["scores"] for r in first]
    assert scores == [r["grades"]["quality"]["metadata"]["judge_repeats"]["scores"] for r in second]
    assert sorted(s for pair in scores for s in pair) == sorted([1.0, 0.0, 0.5, 0.0, 1.0, 1.0] * 2)
    assert summary["cache"]["hits"] == 18


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", ["rubric", "model_judge", "score_model", "label_model", "letta_judge"]
)
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("3", "Input should be a valid integer (got '3')"),
        (2.5, "Input should be a valid integer (got 2.5)"),
        (True, "Input should be a valid integer (got True)"),
        (0, "Input should be greater than or equal to 1 (got 0)"),
        (51, "Input should be less than or equal to 50 (got 51)"),
    ],
)
def test_a_bad_count_is_one_line_and_exit_2(tmp_path, capsys, kind, value, message):
    from ci_evals.cli.app import main

    grader = {
        "rubric": RUBRIC,
        "model_judge": {**RUBRIC, "kind": "model_judge"},
        "score_model": SCORE_MODEL,
        "label_model": LABEL_MODEL,
        "letta_judge": {"kind": "letta_judge", "prompt": "Grade it."},
    }[kind]
    check_one_line(
        tmp_path,
        capsys,
        main,
        {**grader, "judge_repeats": value},
        f"graders.quality.judge_repeats: {message}",
    )


def test_judge_repeats_on_a_grader_that_is_no_judge_is_an_unknown_key(tmp_path, capsys):
    from ci_evals.cli.app import main

    check_one_line(
        tmp_path,
        capsys,
        main,
        {"kind": "tool", "function": "exact_match", "judge_repeats": 3},
        "graders.quality.judge_repeats: unknown key 'judge_repeats'",
    )


def test_judge_samples_and_judge_repeats_together_are_refused(tmp_path, capsys):
    from ci_evals.cli.app import main

    check_one_line(
        tmp_path,
        capsys,
        main,
        {**RUBRIC, "judge_samples": 2, "judge_repeats": 3},
        "graders.quality.judge_samples: judge_samples is the older spelling of judge_repeats",
    )


def check_one_line(tmp_path: Path, capsys, main, grader: dict[str, Any], expected: str) -> None:
    (tmp_path / "dataset.jsonl").write_text('{"id": 1, "input": "q", "ground_truth": "a"}\n')
    (tmp_path / "outputs.jsonl").write_text('{"id": 1, "output": "a"}\n')
    suite = {
        "name": "bad",
        "dataset": "dataset.jsonl",
        "target": {"kind": "replay", "outputs": "outputs.jsonl"},
        "graders": {"quality": grader},
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    rc = main(["run", str(tmp_path / "suite.yaml"), "--output", str(tmp_path / "out"), "-q"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and expected in err, err
    assert not (tmp_path / "out").exists()


# --- the Letta agent judge ----------------------------------------------------------------------


def grade(grader, submission: str, sample: Sample | None = None):
    sample = sample or Sample(id=0, input="What is 2+2?", ground_truth="4")

    async def go():
        await grader.start()
        try:
            return await grader.grade(sample, submission, Trajectory.from_text(submission))
        finally:
            await grader.aclose()

    return asyncio.run(go())


def letta_judge(tmp_path: Path, fake, **raw):
    write_agent_file(tmp_path / "judge.af", agent_file("judge", tools=[SUBMIT_GRADE]))
    raw = {
        "kind": "rubric",
        "prompt": "Grade it.",
        "agent_file": "judge.af",
        "base_url": fake.url,
        **raw,
    }
    return build_grader("agent_judge", raw, Context(tmp_path))


def test_the_letta_judge_asks_a_fresh_judge_k_times(letta_fake, tmp_path):
    answers = iter([(1.0, "yes"), (0.0, "no"), (1.0, "yes again")])
    letta_fake.judge_rule = lambda text: next(answers)
    judge = letta_judge(tmp_path, letta_fake, judge_repeats=3)
    judge.rule = ("gte", 1.0)
    g = grade(judge, "4")
    assert (g.score, g.error) == (pytest.approx(2 / 3), None)
    assert g.metadata["judge_repeats"] == {"scores": [1.0, 0.0, 1.0], "passed": [True, False, True]}
    assert g.rationale == "yes\n(judged 3 times: scores 1, 0, 1)"
    assert (
        len(letta_fake.created) == 3
        and len(set(letta_fake.created)) == 3
        and letta_fake.live() == []
    )
    assert g.metadata["usage"] == {"prompt_tokens": 60, "completion_tokens": 30}


def test_a_letta_judge_repeat_that_fails_errors_the_grade(letta_fake, tmp_path):
    answers = iter([(1.0, "yes"), ("high", "meh"), (1.0, "never asked")])
    letta_fake.judge_rule = lambda text: next(answers)
    g = grade(letta_judge(tmp_path, letta_fake, judge_repeats=3), "4")
    assert (g.score, g.error) == (
        0.0,
        "the judge called submit_grade without a numeric score (score='high')",
    )
    assert len(letta_fake.created) == 2 and "judge_repeats" not in g.metadata


def test_a_letta_judge_with_k1_grades_as_before(letta_fake, tmp_path):
    g = grade(letta_judge(tmp_path, letta_fake), "score=0.8")
    assert (g.score, g.rationale, sorted(g.metadata)) == (
        0.8,
        "found score=0.8",
        ["agent_file", "cache_hits", "cost_usd", "judge_agent_id", "retries", "usage"],
    )
