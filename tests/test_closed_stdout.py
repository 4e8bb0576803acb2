"""A reader that closes stdout early (``ci-evals list | head -1``): the output is cut, exit 141 as a
shell reports for a program SIGPIPE stops, nothing on stderr; the run's files are all written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.run.exits import ExitCode, guarded
from tests.conftest import RUN_FILES

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = str(ROOT / "examples" / "quickstart" / "suite.yaml")


def closed_stdout(*args: str) -> subprocess.CompletedProcess:
    """``ci-evals ARGS`` with stdout a pipe whose reader is already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "ci_evals", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [["list"], ["schema"], ["validate", QUICKSTART]])
def test_a_closed_stdout_cuts_the_output_with_141_and_says_nothing(args):
    out = closed_stdout(*args)
    assert (out.returncode, out.stderr) == (141, "")  # no traceback, no "Exception ignored"
    assert ExitCode.SIGPIPE == 141


def test_a_run_whose_stdout_is_closed_still_writes_every_file(tmp_path):
    out = closed_stdout("run", QUICKSTART, "--output", str(tmp_path / "o"), "-q")
    assert (out.returncode, out.stderr) == (141, "")
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == RUN_FILES
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (summary["verdict"], summary["n_samples"]) == ("passed", 6)


def test_a_broken_pipe_elsewhere_is_still_a_bug(capfd):
    """Stdout is open (pytest's capture file): a BrokenPipeError from anything else is exit 3."""

    def command() -> int:
        raise BrokenPipeError(32, "Broken pipe")

    assert guarded(command) == ExitCode.INTERNAL
    err = capfd.readouterr().err
    assert "BrokenPipeError: [Errno 32] Broken pipe" in err
    assert err.endswith(
        "internal error: this is a bug in ci-evals, please report it with the traceback above\n"
    )
