"""Issue 37 G9: user code cannot move, lose or fake the reports. A grader calling os.chdir leaves
the reports where they were asked for; one closing stdout and stderr leaves the reports and the
verdict's exit code; os._exit(0) from a grader's thread, a coroutine or at import is never a green
exit (CLI and Action); a grader that forks leaves no process behind holding the job's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SuiteDir, replay_suite
from tests.test_action import read_outputs
from tests.test_processes import alive

CLI = [sys.executable, "-m", "ci_evals"]
NO_VERDICT = (
    "error: ci-evals ended with exit 0 before it reached a verdict (code of the suite ended the "
    "process, with os._exit or the like); not a pass\n"
)


def _suite(
    tmp_path: Path, code: str, function: str = "g.py:g", name: str = "suite.yaml"
) -> SuiteDir:
    sd = SuiteDir(tmp_path)
    sd.write(
        "dataset.jsonl",
        [
            {"id": 1, "input": "q", "ground_truth": "a"},
            {"id": 2, "input": "r", "ground_truth": "b"},
        ],
    )
    sd.write("outputs.jsonl", [{"id": 1, "output": "a"}, {"id": 2, "output": "b"}])
    sd.write("g.py", "import os, sys, signal\nfrom ci_evals import grader, GradeResult\n\n" + code)
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": function}}, {"op": "gte", "value": 0.5}),
        name,
    )
    return sd


def _run(root: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=root, capture_output=True, text=True, timeout=timeout)


CHDIR = "@grader\ndef g(sample, submission):\n    os.chdir({where!r})\n    return GradeResult(score=1.0)\n"


def test_a_grader_changing_folder_does_not_move_the_reports(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sd = _suite(tmp_path, CHDIR.format(where=str(elsewhere)))
    proc = _run(tmp_path, "run", "suite.yaml", "-o", "out", "-q", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")) == [
        "junit.xml",
        "report.html",
        "results.jsonl",
        "summary.json",
        "summary.md",
    ]
    assert sd.summary()["verdict"] == "passed"
    assert list(elsewhere.iterdir()) == []
    assert "Results: out/ (summary.json" in proc.stdout


def test_several_suites_with_a_grader_changing_folder_keep_their_combined_report(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _suite(tmp_path, CHDIR.format(where=str(elsewhere)), name="a.yaml")
    (tmp_path / "b.yaml").write_text((tmp_path / "a.yaml").read_text())
    proc = _run(tmp_path, "run", "a.yaml", "b.yaml", "-o", "all", "-q", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((tmp_path / "all" / "suites.json").read_text())
    assert [r["verdict"] for r in rows] == ["passed", "passed"]
    assert (tmp_path / "all" / "summary.md").is_file()
    assert list(elsewhere.iterdir()) == []


CLOSERS = {
    "the streams": "sys.stdout.close()\n    sys.stderr.close()",
    "the descriptors": "for fd in (1, 2):\n        try:\n            os.close(fd)\n        except OSError:\n"
    "            pass",
}


@pytest.mark.parametrize("what", CLOSERS)
def test_a_grader_closing_stdout_and_stderr_loses_neither_reports_nor_the_verdict(tmp_path, what):
    sd = _suite(
        tmp_path,
        f"@grader\ndef g(sample, submission):\n    {CLOSERS[what]}\n    return GradeResult(score=1.0)\n",
    )
    proc = _run(tmp_path, "run", "suite.yaml", "-o", "out", "-q", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert sd.summary()["verdict"] == "passed"
    assert proc.stdout.startswith("t: PASSED (1 of 1 gates passed)\nResults: out/")
    assert proc.stderr == ""


def test_a_grader_closing_stdout_of_a_failing_run_exits_with_the_verdicts_code(tmp_path):
    sd = _suite(
        tmp_path,
        f"@grader\ndef g(sample, submission):\n    {CLOSERS['the descriptors']}\n"
        "    sys.stdout.close()\n    return GradeResult(score=0.0)\n",
    )
    proc = _run(tmp_path, "run", "suite.yaml", "-o", "out", "-q", "--no-cache")
    assert proc.returncode == 1, proc.stderr
    assert sd.summary()["verdict"] == "failed"
    assert "t: FAILED" in proc.stdout


EXITS = {
    "from a grader's thread": ("@grader\ndef g(sample, submission):\n    os._exit(0)\n", "g.py:g"),
    "from a coroutine": ("@grader\nasync def g(sample, submission):\n    os._exit(0)\n", "g.py:g"),
    "at import": ("os._exit(0)\n", "g.py:g"),
}


@pytest.mark.parametrize("where", EXITS)
def test_os_exit_zero_from_user_code_is_never_a_green_run(tmp_path, where):
    code, function = EXITS[where]
    _suite(tmp_path, code, function)
    proc = _run(tmp_path, "run", "suite.yaml", "-o", "out", "-q", "--no-cache")
    assert (proc.returncode, proc.stderr) == (3, NO_VERDICT)
    assert not (tmp_path / "out" / "summary.json").exists()


def test_validate_with_a_module_exiting_zero_at_import_is_not_valid(tmp_path):
    _suite(tmp_path, "os._exit(0)\n")
    proc = _run(tmp_path, "validate", "suite.yaml")
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "", NO_VERDICT)


def test_the_action_with_a_grader_calling_os_exit_zero_fails_the_step(tmp_path):
    _suite(tmp_path, EXITS["from a grader's thread"][0])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    env.update(
        {
            "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "step.md"),
            "INPUT_SUITE": "suite.yaml",
            "INPUT_OUTPUT-DIR": "out",
            "INPUT_COMMENT": "never",
            "INPUT_ARGS": "--no-cache",
        }
    )
    proc = subprocess.run(
        [*CLI, "action"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.endswith(NO_VERDICT)
    outputs = read_outputs(tmp_path / "output.txt")
    assert (outputs["passed"], outputs["verdict"], outputs["exit-code"]) == (
        "false",
        "errored",
        "3",
    )
    assert "not a pass" in (tmp_path / "step.md").read_text()


def test_a_grader_that_forks_leaves_no_copy_holding_the_output(tmp_path):
    pidfile = tmp_path / "copy.pid"
    _suite(
        tmp_path,
        "@grader\ndef g(sample, submission):\n    if sample.id == 1 and os.fork() == 0:\n"
        "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"        open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "    return GradeResult(score=1.0)\n",
    )
    t0 = time.monotonic()
    proc = _run(
        tmp_path, "run", "suite.yaml", "-o", "out", "-q", "--no-cache", timeout=30
    )  # output read to its end
    assert time.monotonic() - t0 < 20
    assert proc.returncode == 0, proc.stderr
    copy = int(pidfile.read_text())
    assert not alive(copy), f"the forked copy {copy} outlived the run"


def test_the_action_whose_run_is_killed_still_says_not_passed(tmp_path):
    _suite(
        tmp_path, "@grader\ndef g(sample, submission):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    env.update(
        {
            "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "step.md"),
            "INPUT_SUITE": "suite.yaml",
            "INPUT_OUTPUT-DIR": "out",
            "INPUT_COMMENT": "never",
            "INPUT_ARGS": "--no-cache",
        }
    )
    proc = subprocess.run(
        [*CLI, "action"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 137, proc.stderr
    outputs = read_outputs(tmp_path / "output.txt")
    assert (outputs["passed"], outputs["verdict"], outputs["exit-code"]) == (
        "false",
        "errored",
        "137",
    )
    assert "ended with exit 137 before its verdict" in (tmp_path / "step.md").read_text()


def test_a_grader_changing_folder_does_not_move_the_llm_cache(tmp_path):
    from tests.fakes.openai_server import FakeOpenAI

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sd = _suite(tmp_path, CHDIR.format(where=str(elsewhere)))
    with FakeOpenAI() as server:  # a judge beside the grader: its answers go to the response cache
        spec = replay_suite(
            {
                "g": {"kind": "tool", "function": "g.py:g"},
                "judge": {
                    "kind": "rubric",
                    "model": "gpt-4o-mini",
                    "base_url": server.url,
                    "prompt": "Score 1 if right.\nQ: {input}\nA: {submission}",
                },
            },
            {"metric_key": "g", "op": "gte", "value": 0.5},
        )
        sd.suite(spec)
        proc = subprocess.run(
            [*CLI, "run", "suite.yaml", "-o", "out", "-q"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "OPENAI_API_KEY": "sk-cache-test-0000"},
        )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / ".ci-evals-cache").is_dir()
    assert list(elsewhere.iterdir()) == []
