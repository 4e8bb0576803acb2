"""Keys letta-evals 0.6-0.25 added: dataset ``sample_id``/``prompt``/``extra_vars``/per-turn ``ground_truth``,
suite ``cleanup``/``sandbox``, ``@suite_setup(client, model_handle)``, ``--model-handle``, ``.env``, the
Action's ``gate`` input."""

from __future__ import annotations

import asyncio
import os

import pytest

from ci_evals.action.inputs import parse_inputs
from ci_evals.action.suites import suite_options
from ci_evals.cli.app import main
from ci_evals.run.runner import Runner, RunOptions
from ci_evals.suite.loader import load_suite
from tests.conftest import replay_suite
from tests.fakes.letta_server import agent_file, write_agent_file

EXTRA_GRADER = """
from letta_evals.decorators import grader
from letta_evals.models import GradeResult, Sample


@grader
def mentions_city(sample: Sample, submission: str) -> GradeResult:
    city = sample.extra_vars["city"]
    return GradeResult(score=1.0 if city in submission else 0.0, rationale=f"looked for {city}")
"""


def test_sample_id_prompt_and_extra_vars_reach_the_grader(sd):
    sd.write(
        "dataset.jsonl",
        [
            {"sample_id": "paris", "prompt": "Capital of France?", "extra_vars": {"city": "Paris"}},
            {
                "sample_id": "rome",
                "input": "Capital of Italy?",
                "metadata": {"extra_vars": {"city": "Rome"}},
            },
        ],
    )
    sd.write(
        "outputs.jsonl", [{"id": "paris", "output": "Paris."}, {"id": "rome", "output": "Milan."}]
    )
    sd.write("g.py", EXTRA_GRADER)
    sd.suite(replay_suite({"city": {"kind": "tool", "function": "g.py:mentions_city"}}))
    assert sd.run() == 0  # no gate, no error: passes
    got = {r["sample_id"]: (r["input"], r["grades"]["city"]["score"]) for r in sd.results()}
    assert got == {"paris": ("Capital of France?", 1.0), "rome": ("Capital of Italy?", 0.0)}


def test_csv_prompt_column_and_json_extra_vars(sd):
    sd.write(
        "dataset.csv",
        'sample_id,prompt,extra_vars\nq1,Capital of France?,"{""city"": ""Paris""}"\n',
    )
    sd.write("outputs.jsonl", [{"id": "q1", "output": "Paris"}])
    sd.write("g.py", EXTRA_GRADER)
    sd.suite(
        replay_suite(
            {"city": {"kind": "tool", "function": "g.py:mentions_city"}}, dataset="dataset.csv"
        )
    )
    assert sd.run() == 0
    assert [(r["sample_id"], r["grades"]["city"]["score"]) for r in sd.results()] == [("q1", 1.0)]


PER_TURN = [
    {"id": 1, "input": ["Say hello", "Capital of France?"], "ground_truth": ["hello", "Paris"]},
    {"id": 2, "input": ["Say hi", "Capital of Spain?"], "ground_truth": ["hi", "Madrid"]},
]


def test_per_turn_ground_truth_grades_each_turn_and_averages(sd):
    sd.write("dataset.jsonl", PER_TURN[:1])
    sd.write(
        "outputs.jsonl",
        [
            {
                "id": 1,
                "messages": [
                    [{"role": "assistant", "content": "hello there"}],
                    [{"role": "assistant", "content": "It is Lyon"}],
                ],
            }
        ],
    )
    sd.suite(replay_suite({"has": {"kind": "tool", "function": "contains"}}))
    rc = sd.run("--gate", "has avg_score gte 0.5")
    [rec] = sd.results()
    grade = rec["grades"]["has"]
    # letta-evals grade_per_turn: turn scores [1.0, 0.0], sample score their mean
    assert (rc, grade["score"], grade["rationale"]) == (0, 0.5, "1/2 turns passed (mean 0.5000)")
    assert [
        (t["turn"], t["score"], t["submission"]) for t in grade["metadata"]["per_turn_grades"]
    ] == [(0, 1.0, "hello there"), (1, 0.0, "It is Lyon")]
    assert rec["submission"]["has"] == "[Turn 0] hello there | [Turn 1] It is Lyon"


def test_per_turn_sample_missing_a_turn_is_errored(sd):
    sd.write("dataset.jsonl", PER_TURN[1:])
    sd.write("outputs.jsonl", [{"id": 2, "messages": [[{"role": "assistant", "content": "hi"}]]}])
    sd.suite(replay_suite({"has": {"kind": "tool", "function": "contains"}}))
    assert sd.run("--gate", "has avg_score gte 0") == 1
    grade = sd.results()[0]["grades"]["has"]
    assert (grade["score"], grade["error"]) == (
        None,
        "turn 1: the target returned no messages for this turn",
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"id": 1, "input": "one", "ground_truth": ["a", "b"]},
            "'ground_truth' is a list of 2: 'input' must be a list of as many turns (it is a string)",
        ),
        (
            {"id": 1, "input": ["one", "two", "three"], "ground_truth": ["a", "b"]},
            "'ground_truth' is a list of 2: 'input' must be a list of as many turns (it has 3)",
        ),
        (
            {"id": 1, "input": ["one"], "ground_truth": [1]},
            "'ground_truth' list must hold strings, one per input turn",
        ),
    ],
)
def test_per_turn_ground_truth_shape_errors(sd, capsys, row, message):
    sd.write("dataset.jsonl", [row])
    sd.write("outputs.jsonl", [{"id": 1, "output": "x"}])
    sd.suite(replay_suite({"has": {"kind": "tool", "function": "contains"}}))
    assert main(["validate", str(sd.root / "suite.yaml")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {sd.root / 'dataset.jsonl'}:1: {message}"


def letta_suite(sd, **top) -> None:
    write_agent_file(sd.root / "agent.af", agent_file("echo-agent"))
    sd.write("dataset.jsonl", [{"id": 1, "input": "hi"}])
    spec = {
        "name": "letta",
        "dataset": "dataset.jsonl",
        "target": {
            "kind": "letta_agent",
            "agent_file": "agent.af",
            "base_url": "http://127.0.0.1:9",
            "model_handles": ["openai/gpt-4o-mini", "anthropic/claude-haiku"],
        },
        "graders": {"has": {"kind": "tool", "function": "contains"}},
    }
    spec.update(top)
    sd.suite(spec)


def test_top_level_cleanup_reaches_the_letta_target(sd):
    letta_suite(sd, cleanup=False, max_concurrent=3, output="results")
    suite = load_suite(sd.root / "suite.yaml", offline=True, cache_dir=False)
    assert (suite.target.spec.cleanup, suite.spec.max_concurrent, suite.spec.output) == (
        False,
        3,
        "results",
    )


def test_cleanup_on_a_target_that_creates_no_agents_is_an_error(sd, capsys):
    one_sample_suite(sd, cleanup=True)
    assert main(["validate", str(sd.root / "suite.yaml")]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "suite.yaml:10: cleanup: 'cleanup' applies to targets that create agents; target kind 'replay' creates none"
        )
    )


def test_sandbox_validates_with_a_warning_and_run_refuses(sd, capsys):
    letta_suite(sd, sandbox={"kind": "modal"})
    assert main(["validate", str(sd.root / "suite.yaml")]) == 0
    assert (
        "sandbox: letta-evals' per-sample Modal sandboxes are not supported"
        in capsys.readouterr().err
    )
    assert sd.run() == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "sandbox: letta-evals' per-sample Modal sandboxes are not supported: ci-evals runs samples on this "
            "machine (remove 'sandbox' to run them here)"
        )
    )


SETUP = """
import json
from pathlib import Path
from letta_evals.decorators import suite_setup


@suite_setup
async def prepare(client, model_handle):
    with open(Path(__file__).parent / "calls.jsonl", "a") as fh:
        fh.write(json.dumps([type(client).__name__, model_handle]) + "\\n")
"""


def test_suite_setup_with_model_handle_runs_once_per_handle(sd):
    sd.write("setup.py", SETUP)
    letta_suite(sd, setup_script="setup.py:prepare")
    suite = load_suite(sd.root / "suite.yaml", cache_dir=False)
    asyncio.run(Runner(suite, RunOptions(output=sd.root / "out"))._call_setup())
    assert (sd.root / "calls.jsonl").read_text().splitlines() == [
        '["AsyncLetta", "openai/gpt-4o-mini"]',
        '["AsyncLetta", "anthropic/claude-haiku"]',
    ]


def test_model_handle_flag_keeps_one_handle(sd):
    from ci_evals.run.overrides import select_model

    letta_suite(sd)
    suite = load_suite(sd.root / "suite.yaml", offline=True, cache_dir=False)
    select_model(suite, "anthropic/claude-haiku")
    assert suite.target.models() == ["anthropic/claude-haiku"]


def test_model_handle_not_listed_is_exit_2(sd, capsys):
    letta_suite(sd)
    assert sd.run("--model-handle", "openai/gpt-4o") == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "target.model_handles: --model-handle openai/gpt-4o: not one of the target's model handles "
            "(its model_handles are openai/gpt-4o-mini, anthropic/claude-haiku) (did you mean 'openai/gpt-4o-mini'?)"
        )
    )


def test_model_handle_on_a_target_without_handles_is_exit_2(sd, capsys):
    one_sample_suite(sd)
    assert sd.run("--model-handle", "openai/gpt-4o") == 2
    assert "(it lists no model_handles)" in capsys.readouterr().err


def one_sample_suite(sd, **top) -> None:
    sd.write("dataset.jsonl", [{"id": 1, "input": "hi"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "hi"}])
    sd.suite(replay_suite({"has": {"kind": "tool", "function": "contains"}}, **top))


def test_dotenv_is_loaded_without_overriding_and_never_printed(sd, capsys, monkeypatch):
    for name in ("CIEV_T_SECRET", "CIEV_T_KEPT"):
        monkeypatch.setenv(
            name, "x"
        )  # registered, so the test leaves the environment as it found it
        monkeypatch.delenv(name)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("CIEV_T_KEPT", "from-environment")
    monkeypatch.chdir(sd.root)
    sd.write(
        ".env", "CIEV_T_SECRET=s3cr3t-dotenv-value\nCIEV_T_KEPT=from-dotenv\nnot a valid line\n"
    )
    one_sample_suite(sd)
    assert main(["validate", "suite.yaml"]) == 0
    out = capsys.readouterr()
    assert (os.environ["CIEV_T_SECRET"], os.environ["CIEV_T_KEPT"]) == (
        "s3cr3t-dotenv-value",
        "from-environment",
    )
    assert "s3cr3t" not in out.out + out.err and "not a valid line" not in out.out + out.err


def test_dotenv_is_not_loaded_in_ci(sd, capsys, monkeypatch):
    monkeypatch.setenv("CIEV_T_SECRET", "x")
    monkeypatch.delenv("CIEV_T_SECRET")
    monkeypatch.setenv("CI", "true")
    monkeypatch.chdir(sd.root)
    sd.write(".env", "CIEV_T_SECRET=s3cr3t\n")
    one_sample_suite(sd)
    assert main(["validate", "suite.yaml"]) == 0
    assert "CIEV_T_SECRET" not in os.environ
    assert (
        capsys.readouterr().err.strip()
        == "note: ./.env not loaded: CI is set (set variables in the workflow instead)"
    )


def test_action_gate_input_adds_one_gate_flag_per_line(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: x\n")
    inputs = parse_inputs(
        {
            "INPUT_SUITE": str(suite),
            "INPUT_GATE": "reward avg_score gte 0.75\n\n  quality accuracy gte 80  \n",
        }
    )
    assert inputs.gates == ["reward avg_score gte 0.75", "quality accuracy gte 80"]
    options = suite_options(inputs, tmp_path / "out", None)
    assert (options.output, options.gate, options.baseline) == (
        tmp_path / "out",
        ["reward avg_score gte 0.75", "quality accuracy gte 80"],
        None,
    )
    inputs.args = ["--gate", "extra mean gte 0.5", "--max-concurrent", "3"]
    options = suite_options(inputs, tmp_path / "out", str(tmp_path / "base"))
    assert (options.gate, options.max_concurrent, options.baseline) == (
        ["reward avg_score gte 0.75", "quality accuracy gte 80", "extra mean gte 0.5"],
        3,
        tmp_path / "base",
    )
