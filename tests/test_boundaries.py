"""Outside text at the boundary: lone surrogates never crash a run, the agent never sees the answer,
and templates substitute once on every template path."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ci_evals.config.specs import Context
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.base import build_grader
from ci_evals.graders.judge_prompt import fill_rubric
from tests.conftest import custom_grade_suite, replay_suite

# ---------------------------------------------------------------- lone surrogates and bad bytes


def command_suite(sd, script: str, gate: dict | None = None, data=None) -> None:
    sd.write("agent.py", script)
    sd.write("dataset.jsonl", data or [{"id": 1, "input": "q", "ground_truth": "answer"}])
    spec = {
        "name": "t",
        "dataset": "dataset.jsonl",
        "target": {"kind": "command", "command": [sys.executable, "agent.py"]},
        "graders": {"c": {"kind": "tool", "function": "contains"}},
    }
    if gate:
        spec["gate"] = gate
    sd.suite(spec)


def raw_lines(sd) -> list[dict]:
    data = (sd.root / "out" / "results.jsonl").read_bytes()
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]  # strict UTF-8


def test_a_lone_surrogate_in_agent_output_is_replaced_and_counted(sd):
    command_suite(sd, 'print(\'{"output": "answer \\\\ud83d"}\')\n', {"op": "gte", "value": 0.5})
    assert sd.run() == 0
    (rec,) = raw_lines(sd)
    assert (rec["submission"]["c"], rec["replaced_chars"]) == ("answer \ufffd", 1)
    assert sd.summary()["verdict"] == "passed"


def test_undecodable_bytes_from_a_command_are_replaced_and_counted(sd):
    command_suite(sd, "import sys\nsys.stdout.buffer.write(b'answer \\xff\\xfe')\n")
    assert sd.run() == 0
    (rec,) = raw_lines(sd)
    assert (rec["submission"]["c"], rec["replaced_chars"]) == ("answer \ufffd\ufffd", 2)


def test_a_lone_surrogate_in_the_dataset_and_replay_output(sd):
    sd.write("dataset.jsonl", '{"id": 1, "input": "q \\udc00", "ground_truth": "a"}\n')
    sd.write("outputs.jsonl", '{"id": 1, "output": "a \\ud800"}\n')
    sd.suite(
        replay_suite({"c": {"kind": "tool", "function": "contains"}}, {"op": "gte", "value": 0.5})
    )
    assert sd.run() == 0
    (rec,) = raw_lines(sd)
    assert (rec["input"], rec["submission"]["c"], rec["replaced_chars"]) == (
        "q \ufffd",
        "a \ufffd",
        2,
    )


def test_a_lone_surrogate_in_a_grader_rationale_is_replaced_when_written(sd):
    custom_grade_suite(sd, "GradeResult(score=1.0, rationale='fine \\ud83d')")
    assert sd.run() == 0
    (rec,) = raw_lines(sd)
    assert (rec["grades"]["g"]["rationale"], rec["replaced_chars"]) == ("fine \ufffd", 1)
    assert (sd.root / "out" / "summary.md").exists()


# ---------------------------------------------------------------- the agent never sees the answer


def test_an_agent_echoing_its_stdin_does_not_see_the_answer(sd):
    command_suite(
        sd,
        "import sys\nprint(sys.stdin.read())\n",
        {"op": "gte", "value": 0.5},
        data=[
            {
                "id": 1,
                "input": "q",
                "ground_truth": "SECRET-42",
                "rubric_vars": {"tone": "SECRET-TONE"},
                "metadata": {"topic": "t"},
                "tags": ["a"],
            }
        ],
    )
    assert sd.run() == 1
    (rec,) = raw_lines(sd)
    assert json.loads(rec["submission"]["c"]) == {
        "id": 1,
        "input": "q",
        "metadata": {"topic": "t"},
        "tags": ["a"],
        "agent_args": None,
        "extra_vars": {},
        "run": 0,
    }
    assert sd.summary()["verdict"] == "failed"


def test_the_http_target_receives_no_ground_truth(sd):
    from pytest_httpserver import HTTPServer
    from werkzeug import Response

    seen = []
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    try:

        def handler(request):
            seen.append(request.get_json())
            return Response("hello")

        server.expect_request("/agent", method="POST").respond_with_handler(handler)
        sd.write(
            "dataset.jsonl",
            [{"id": 7, "input": "hi", "ground_truth": "SECRET", "rubric_vars": {"x": 1}}],
        )
        sd.suite(
            {
                "name": "http",
                "dataset": "dataset.jsonl",
                "target": {"kind": "http", "url": server.url_for("/agent")},
                "graders": {"e": {"kind": "tool", "function": "contains"}},
            }
        )
        sd.run()
    finally:
        server.stop()
    assert seen == [
        {
            "id": 7,
            "input": "hi",
            "metadata": {},
            "tags": [],
            "agent_args": None,
            "extra_vars": {},
            "run": 0,
        }
    ]


# ---------------------------------------------------------------- templates substitute once

TRICKY = "I say {ground_truth} and {{ item.ground_truth }} and {tone} and {input}"
SAMPLE = Sample(
    id=1,
    input="the question",
    ground_truth="THE ANSWER {submission}",
    rubric_vars={"tone": "polite"},
)


def ctx(tmp_path: Path) -> Context:
    return Context(tmp_path, tmp_path / "suite.yaml")


def test_rubric_fills_once():
    rubric = "Expected {ground_truth}. Got {submission}. Tone {tone}. Item {{ item.ground_truth }}."
    assert fill_rubric(rubric, SAMPLE, TRICKY, ["tone"]) == (
        "Expected THE ANSWER {submission}. Got "
        + TRICKY
        + ". Tone polite. Item THE ANSWER {submission}."
    )


def test_rubric_without_mustache_fills_once():
    assert (
        fill_rubric("{submission} / {ground_truth}", SAMPLE, TRICKY)
        == f"{TRICKY} / THE ANSWER {{submission}}"
    )


@pytest.mark.parametrize("kind", ["score_model", "label_model"])
def test_model_grader_messages_render_once(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-templating-000")
    raw = {
        "kind": kind,
        "model": "gpt-4o-mini",
        "input": [
            {"role": "user", "content": "{{ sample.output_text }} vs {{ item.ground_truth }}"}
        ],
    }
    if kind == "label_model":
        raw.update(labels=["good", "bad"], passing_labels=["good"])
    grader = build_grader("judge", raw, ctx(tmp_path))
    users = [
        m["content"]
        for m in grader.messages(SAMPLE, TRICKY, Trajectory.from_text(TRICKY))
        if m["role"] == "user"
    ]
    assert users == [f"{TRICKY} vs THE ANSWER {{submission}}"]


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "string_check", "operation": "eq"},
        {"kind": "text_similarity", "evaluation_metric": "fuzzy_match", "pass_threshold": 0.5},
    ],
)
def test_pair_graders_render_once(tmp_path, raw):
    grader = build_grader(
        "g",
        {**raw, "input": "{{ sample.output_text }}", "reference": "{{ item.ground_truth }}"},
        ctx(tmp_path),
    )
    assert grader.texts(SAMPLE, TRICKY, Trajectory.from_text(TRICKY)) == (
        TRICKY,
        "THE ANSWER {submission}",
    )


def test_letta_judge_prompt_fills_once(tmp_path, monkeypatch):
    monkeypatch.setenv("LETTA_BASE_URL", "http://127.0.0.1:9")
    grader = build_grader(
        "j",
        {
            "kind": "letta_judge",
            "prompt": "Judge {submission} against {ground_truth} ({tone})",
            "rubric_vars": ["tone"],
        },
        ctx(tmp_path),
    )
    prompt = grader.build_prompt(SAMPLE, TRICKY)
    assert f"Judge {TRICKY} against THE ANSWER {{submission}} (polite)" in prompt


def test_a_lone_surrogate_from_a_model_and_its_judge_never_costs_the_verdict(sd, monkeypatch):
    from tests.fakes.openai_server import FakeOpenAI

    def reply(req):
        if req.get("response_format"):  # the judge
            return {"score": 1, "rationale": "good \ud83d"}
        return "Paris \udc00"

    with FakeOpenAI(reply) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-surrogate-000")
        sd.write(
            "dataset.jsonl", [{"id": 1, "input": "Capital of France?", "ground_truth": "Paris"}]
        )
        sd.suite(
            {
                "name": "m",
                "dataset": "dataset.jsonl",
                "target": {"kind": "model", "model": "gpt-4o-mini"},
                "graders": {"judge": {"kind": "rubric", "prompt": "Is {submission} right?"}},
                "gate": {"op": "gte", "value": 0.5},
            }
        )
        assert sd.run() == 0
    (rec,) = raw_lines(sd)
    assert rec["submission"]["judge"] == "Paris \ufffd"
    assert rec["grades"]["judge"]["rationale"] == "good \ufffd"
    assert rec["replaced_chars"] == 2
