"""F1: SystemExit, KeyboardInterrupt and GeneratorExit from the suite author's Python are that code's
error, never a green exit without summary.json; the Action says passed=true only with a summary
whose verdict is passed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ci_evals.action import main as action
from ci_evals.action import suites
from ci_evals.action.report import passed_for_sure
from ci_evals.action.suites import SuiteRun
from tests.conftest import replay_suite
from tests.test_action import read_outputs

ESCAPES = [
    "SystemExit(0)",
    "SystemExit()",
    "KeyboardInterrupt()",
    "GeneratorExit()",
    "SystemExit('bye')",
]


def _two_samples(sd) -> None:
    sd.write(
        "dataset.jsonl",
        [
            {"id": 1, "input": "q", "ground_truth": "a"},
            {"id": 2, "input": "r", "ground_truth": "b"},
        ],
    )
    sd.write("outputs.jsonl", [{"id": 1, "output": "a"}, {"id": 2, "output": "b"}])


def _reward_suite(sd, body: str, *, is_async: bool = False) -> None:
    _two_samples(sd)
    kw = "async def" if is_async else "def"
    sd.write(
        "rewards.py",
        "from ci_evals import reward_composer\n\n@reward_composer\n"
        f"{kw} compose(ctx):\n    if ctx.sample.id == 2:\n        {body}\n    return 1.0\n",
    )
    sd.suite(
        replay_suite(
            {"acc": {"kind": "tool", "function": "exact_match"}},
            {"metric_key": "reward", "op": "gte", "value": 0.5},
            reward={"kind": "custom", "function": "rewards.py:compose"},
        )
    )


@pytest.mark.parametrize("escape", ESCAPES)
@pytest.mark.parametrize("is_async", [False, True])
def test_an_escape_from_a_reward_composer_is_that_samples_error(sd, capsys, escape, is_async):
    _reward_suite(sd, f"raise {escape}", is_async=is_async)
    assert sd.run() == 1
    summary = sd.summary()
    assert summary["verdict"] == "errored"
    rows = sd.results()
    assert [r["grades"]["reward"]["score"] for r in rows] == [1.0, None]
    assert (
        rows[1]["grades"]["reward"]["error"]
        == f"reward composer rewards.py:compose failed: {escape.replace('()', '()')}"
    )
    assert summary["metrics"]["reward"]["errors"] == 1


def test_setup_script_exiting_zero_is_a_one_line_configuration_error(sd, capsys):
    _two_samples(sd)
    sd.write(
        "setup.py",
        "from ci_evals import suite_setup\n\n@suite_setup\ndef prepare():\n    raise SystemExit(0)\n",
    )
    sd.suite(
        replay_suite(
            {"acc": {"kind": "tool", "function": "exact_match"}},
            {"op": "gte", "value": 0.5},
            setup_script="setup.py:prepare",
        )
    )
    assert sd.run() == 2
    err = capsys.readouterr().err
    assert (
        err == f"error: {sd.root / 'suite.yaml'}: setup_script: setup script raised SystemExit(0)\n"
    )
    assert not (sd.root / "out" / "summary.json").exists()


def test_async_setup_script_raising_keyboard_interrupt_is_its_error(sd, capsys):
    _two_samples(sd)
    sd.write(
        "setup.py",
        "from ci_evals import suite_setup\n\n@suite_setup\nasync def prepare():\n"
        "    raise KeyboardInterrupt\n",
    )
    sd.suite(
        replay_suite(
            {"acc": {"kind": "tool", "function": "exact_match"}},
            {"op": "gte", "value": 0.5},
            setup_script="setup.py:prepare",
        )
    )
    assert sd.run() == 2
    assert (
        capsys.readouterr().err
        == f"error: {sd.root / 'suite.yaml'}: setup_script: setup script raised KeyboardInterrupt()\n"
    )


def test_module_exiting_at_import_is_a_configuration_error(sd, capsys):
    _two_samples(sd)
    sd.write("g.py", "import sys\nsys.exit(0)\n")
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": "g.py:f"}}, {"op": "gte", "value": 0.5})
    )
    assert sd.run() == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "importing it failed: SystemExit: 0" in err and "g.py" in err


@pytest.mark.parametrize("is_async", [False, True])
def test_async_and_sync_custom_graders_exiting_are_grading_errors(sd, is_async):
    _two_samples(sd)
    kw = "async def" if is_async else "def"
    sd.write(
        "g.py",
        "from ci_evals import grader, GradeResult\n\n@grader\n"
        f"{kw} g(sample, submission):\n    raise GeneratorExit\n",
    )
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": "g.py:g"}}, {"op": "gte", "value": 0.5})
    )
    assert sd.run() == 1
    assert [r["grades"]["g"]["error"] for r in sd.results()] == [
        "grader 'g.py:g' raised GeneratorExit()"
    ] * 2
    assert sd.summary()["verdict"] == "errored"


def test_cli_process_with_an_exiting_composer_never_exits_zero(tmp_path):
    """The whole process, as CI runs it: exit 1 and a summary, not exit 0 without one."""
    from tests.conftest import SuiteDir

    sd = SuiteDir(tmp_path)
    _reward_suite(sd, "raise SystemExit(0)")
    proc = subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", "suite.yaml", "-o", "out", "-q", "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["verdict"] == "errored"
    assert "Traceback" not in proc.stderr


def test_action_never_says_passed_without_a_passing_summary(tmp_path, monkeypatch):
    """Even if something ends the CLI with exit 0 and no summary, the Action reports failure."""
    monkeypatch.chdir(tmp_path)
    from tests.test_action import GOOD, write_suite

    suite = write_suite(tmp_path / "s", "s", GOOD)
    env = {
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step.md"),
        "INPUT_SUITE": str(suite),
        "INPUT_OUTPUT-DIR": str(tmp_path / "out"),
        "INPUT_COMMENT": "never",
    }
    monkeypatch.setattr(
        suites, "run_here", lambda inputs, suite, out, baseline: (0, None, out, "")
    )  # exit 0, no summary
    assert action.run_action(env) == 3
    outputs = read_outputs(tmp_path / "output.txt")
    assert (
        outputs["passed"],
        outputs["verdict"],
        outputs["exit-code"],
        outputs["summary-json"],
    ) == ("false", "errored", "3", "")


def test_action_with_an_exiting_composer_is_red(tmp_path, monkeypatch):
    from tests.conftest import SuiteDir

    monkeypatch.chdir(tmp_path)
    sd = SuiteDir(tmp_path)
    _reward_suite(sd, "raise SystemExit(0)")
    env = {
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step.md"),
        "INPUT_SUITE": str(tmp_path / "suite.yaml"),
        "INPUT_OUTPUT-DIR": str(tmp_path / "out"),
        "INPUT_COMMENT": "never",
        "INPUT_ARGS": "--no-cache",
    }
    assert action.run_action(env) == 1
    outputs = read_outputs(tmp_path / "output.txt")
    assert (outputs["passed"], outputs["verdict"], outputs["exit-code"]) == (
        "false",
        "errored",
        "1",
    )
    assert outputs["summary-json"] == str(tmp_path / "out" / "summary.json")


def test_passed_needs_every_summary_passed():
    run = SuiteRun("s", None, 0, {"verdict": "passed"})
    other = SuiteRun("t", None, 0, {"verdict": "errored"})
    assert passed_for_sure([run], 0, "passed") is True
    assert passed_for_sure([run, other], 0, "passed") is False
    assert passed_for_sure([SuiteRun("s", None, 0, None)], 0, "passed") is False
    assert passed_for_sure([], 0, "passed") is False
