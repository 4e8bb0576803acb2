"""Shared fixtures: a helper that writes a suite folder and runs the CLI in-process."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import yaml

from ci_evals.cli.app import main

# The tests never read or write this user's own cache (report.html's compiled template, the price
# list's memo): one folder of their own for the session, their subprocesses' too.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ci-evals-tests-cache-")
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)


class SuiteDir:
    """A temporary suite folder: write files, run ci-evals, read what it wrote."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, name: str, content) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, (dict, list)) and name.endswith((".yaml", ".yml")):
            content = yaml.safe_dump(content, sort_keys=False)
        elif isinstance(content, list) and name.endswith(".jsonl"):
            content = "".join(json.dumps(r) + "\n" for r in content)
        path.write_text(content, encoding="utf-8")
        return path

    def suite(self, spec: dict, name: str = "suite.yaml") -> Path:
        return self.write(name, spec)

    def run(self, *args: str, suite: str = "suite.yaml", out: str = "out") -> int:
        return main(
            [
                "run",
                str(self.root / suite),
                "--output",
                str(self.root / out),
                "--no-cache",
                "-q",
                *args,
            ]
        )

    def summary(self, out: str = "out") -> dict:
        return json.loads((self.root / out / "summary.json").read_text())

    def results(self, out: str = "out") -> list[dict]:
        lines = (self.root / out / "results.jsonl").read_text().splitlines()
        return [json.loads(x) for x in lines if x.strip()]


@pytest.fixture
def sd(tmp_path: Path) -> SuiteDir:
    return SuiteDir(tmp_path)


RUN_FILES = [
    ".ci-evals-run.json",  # the folder's lock and the run's fingerprints (for --resume)
    "junit.xml",
    "report.html",
    "results.jsonl",
    "summary.json",
    "summary.md",
]
"""Every file a finished run leaves in its results folder, sorted by name."""


def replay_suite(graders: dict, gate: dict | None = None, **extra) -> dict:
    """A replay suite over dataset.jsonl/outputs.jsonl with the given graders."""
    spec = {
        "name": "t",
        "dataset": "dataset.jsonl",
        "target": {"kind": "replay", "outputs": "outputs.jsonl"},
        "graders": graders,
    }
    if gate is not None:
        spec["gate"] = gate
    spec.update(extra)
    return spec


def custom_grade_suite(sd: SuiteDir, result: str) -> None:
    """One sample, recorded output 'x', one grader ``g`` (``g.py:odd``) returning the GradeResult
    expression ``result``: for what a custom grader can hand back."""
    sd.write(
        "g.py",
        "from ci_evals import grader, GradeResult\n\n@grader\ndef odd(sample, submission):\n"
        f"    return {result}\n",
    )
    sd.write("dataset.jsonl", [{"id": 1, "input": "q"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "x"}])
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": "g.py:odd"}}, {"op": "gte", "value": 0.5})
    )


def exited(pid: int) -> bool:
    """Whether process ``pid`` has ended: gone from /proc, or a zombie nobody has reaped yet (Linux)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def in_fresh_process(code: str, env: dict | None = None) -> str:
    """What ``code`` (dedented) prints in a new interpreter with ``env`` added: for what needs one
    thread (fork) or a clean module state. It must exit 0."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()
