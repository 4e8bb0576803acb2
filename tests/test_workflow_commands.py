"""On a GitHub runner, text from a model never becomes a workflow command (``::error::``, ``::add-mask::``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from tests.conftest import replay_suite

HOSTILE = (
    "fine\n::error::pwned\n::add-mask::Paris\n::stop-commands::guess\n::guess::\n::warning::after"
)


def _run(tmp_path, github_actions: str) -> subprocess.CompletedProcess:
    (tmp_path / "dataset.jsonl").write_text(
        json.dumps({"id": 1, "input": "q", "ground_truth": "Paris"}) + "\n"
    )
    (tmp_path / "outputs.jsonl").write_text(json.dumps({"id": 1, "output": HOSTILE}) + "\n")
    spec = replay_suite(
        {"acc": {"kind": "tool", "function": "exact_match"}}, {"op": "gte", "value": 0.5}
    )
    (tmp_path / "suite.yaml").write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    env["GITHUB_ACTIONS"] = github_actions
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", "suite.yaml", "-o", "out", "--dry-run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_dry_run_on_a_runner_prints_model_output_inside_a_stop_commands_window(tmp_path):
    proc = _run(tmp_path, "true")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    start = re.fullmatch(r"::stop-commands::([0-9a-f]{32})", lines[0])
    assert start is not None, lines[0]
    assert lines[-1] == f"::{start.group(1)}::"
    assert sum(line == f"::{start.group(1)}::" for line in lines) == 1
    assert (
        "::error::pwned" in lines[1:-1]
    )  # printed raw by the dry run's comment, inside the window


def test_outside_a_runner_nothing_is_added(tmp_path):
    proc = _run(tmp_path, "false")
    assert "::stop-commands::" not in proc.stdout.splitlines()[0]
