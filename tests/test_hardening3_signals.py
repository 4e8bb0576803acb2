"""Issue 37 (low): asyncio's "Unknown child process pid N, will report returncode 255" never
reaches stderr. It is logged when a program was reaped before asyncio's child watcher asked for it:
what closing a killed command's pipes does under a storm of signals (the transport polls, and so
reaps, the program). Here a grader reaps its own program first, which makes the same line every time."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import SuiteDir, replay_suite

REAPS_FIRST = """import asyncio, os
from ci_evals import grader, GradeResult

@grader
async def g(sample, submission):
    proc = await asyncio.create_subprocess_exec("true")
    try:
        os.waitpid(proc.pid, 0)  # reaped before the child watcher's waitpid (as a rule)
    except ChildProcessError:  # the watcher won the race this time (seen once under CI's load)
        pass
    await proc.wait()
    return GradeResult(score=1.0)
"""


def test_asyncio_reaping_noise_does_not_reach_stderr(tmp_path):
    sd = SuiteDir(tmp_path)
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "a"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "a"}])
    sd.write("g.py", REAPS_FIRST)
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": "g.py:g"}}, {"op": "gte", "value": 0.5})
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", "suite.yaml", "-o", "out", "-q", "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert sd.summary()["verdict"] == "passed"
