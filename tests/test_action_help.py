"""``ci-evals action --help`` describes action mode, and its inputs and outputs are action.yml's."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ci_evals.action.help import INPUTS, OUTPUTS, action_help
from ci_evals.cli.app import main

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def test_inputs_are_action_yml_inputs_in_order_with_their_defaults():
    declared = [(name, str(spec.get("default", ""))) for name, spec in ACTION["inputs"].items()]
    assert [(name, default) for name, default, _ in INPUTS] == declared


def test_outputs_are_action_yml_outputs_in_order():
    assert [name for name, _ in OUTPUTS] == list(ACTION["outputs"])


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_action_help_describes_action_mode(flag, capsys):
    assert main(["action", flag]) == 0
    out = capsys.readouterr().out
    assert out == action_help()
    lines = out.splitlines()
    assert lines[0] == "usage: ci-evals action [COMMAND ...]"
    assert (
        "  INPUT_MAX-CONCURRENT  samples in flight (default: the suite's max_concurrent, else 10)"
        in lines
    )
    assert (
        "  INPUT_OUTPUT-DIR      results folder (a subfolder per suite when several) [default: ci-evals-results]"
        in lines
    )
    assert '  passed        "true" when every suite\'s verdict is passed, else "false"' in lines
    assert (
        "  GITHUB_STEP_SUMMARY  file the markdown report is appended to (on every outcome)" in lines
    )
    for name in ACTION["inputs"]:
        assert sum(line.startswith(f"  INPUT_{name.upper()} ") for line in lines) == 1, name
    for name in ACTION["outputs"]:
        assert sum(line.startswith(f"  {name} ") for line in lines) == 1, name


def test_the_local_run_shown_in_the_help_works(tmp_path):
    """The help's "run it locally" lines, run as written in a folder holding the examples."""
    lines = action_help().splitlines()
    start = lines.index(
        "run it locally (runs the suite, writes the report and outputs to files, posts nothing):"
    )
    shown = " ".join(line.strip().rstrip("\\") for line in lines[start + 1 : start + 3])
    *assignments, program, mode = shlex.split(shown)
    assert (program, mode) == ("ci-evals", "action")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    env.update(a.split("=", 1) for a in assignments)
    proc = subprocess.run(
        [sys.executable, "-m", "ci_evals", "action"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("ci-evals: dry run, no PR comment posted")
    assert "quickstart" in (tmp_path / "summary.md").read_text(encoding="utf-8").splitlines()[0]
    outputs = (tmp_path / "outputs.txt").read_text(encoding="utf-8").splitlines()
    values = {
        outputs[i].split("<<")[0]: outputs[i + 1]
        for i in range(len(outputs))
        if "<<ghadelimiter_" in outputs[i]
    }
    assert (values["passed"], values["exit-code"]) == ("true", "0")
    assert (tmp_path / "ci-evals-results" / "summary.json").is_file()
