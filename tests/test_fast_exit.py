"""The command line's end (ci_evals.cli.app.end_fast): where nothing but ci-evals ran, the process
skips the interpreter's teardown, yet atexit's callbacks run, output is flushed and the exit code is
kept; where a user file ran, or a thread exit waits for is left, the exit is Python's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_startup import waiting_suite

# An open file whose buffered write only the interpreter's teardown finishes (no close, no flush)
# stands for what a skipped teardown loses; an atexit callback; an optional thread exit waits for;
# then the command line as `ci-evals ARGS...` (main() reading sys.argv). argv[1]: that file.
PROGRAM = """
import atexit, sys, threading, time
LEFT_OPEN = open(sys.argv.pop(1), "w")
LEFT_OPEN.write("finished by the teardown")
atexit.register(lambda: print("atexit ran", flush=True))
if sys.argv[1] == "--thread":
    sys.argv.pop(1)
    def late():
        time.sleep(1.5)
        print("thread finished", flush=True)
    threading.Thread(target=late).start()
from ci_evals.cli.app import main
sys.argv[0] = "ci-evals"
raise SystemExit(main())
"""


def ended(tmp_path: Path, *args: str) -> tuple[int, list[str], str]:
    """Exit code, stdout lines, and what the left-open file holds after the process ended."""
    left = tmp_path / "left-open.txt"
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(left), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.returncode, out.stdout.splitlines(), left.read_text()


TORN_DOWN = "finished by the teardown"


def test_a_command_of_ci_evals_alone_skips_the_teardown_but_not_atexit_nor_output(tmp_path):
    code, lines, left = ended(tmp_path, "list")
    assert code == 0
    assert "exact_match" in "\n".join(lines)  # the command's output, flushed before the exit
    assert lines[-1] == "atexit ran"
    assert left == ""  # no teardown: nothing of the suite author's ran, nothing of ours needs one


def test_the_exit_code_is_kept(tmp_path):
    (tmp_path / "suite.yaml").write_text("name: x\n")  # no dataset, no target: invalid
    code, lines, left = ended(tmp_path, "validate", str(tmp_path / "suite.yaml"))
    assert code == 2
    assert lines.count("atexit ran") == 2  # the guard's child's (inherited), then the guard's
    assert left == ""


def _suite_with_a_users_grader(folder: Path) -> str:
    """A suite graded by the author's g.py (test_startup's: validate runs no target)."""
    return waiting_suite(folder, {"kind": "tool", "function": "g.py:g"})


def test_a_process_that_ran_a_users_file_ends_as_python_ends(tmp_path):
    """validate imports the author's grader in the guard's child, which then ends as Python ends
    (a file the grader left open keeps its buffered write); the guard, which ran none of it,
    skips its teardown (the program's own left-open file, opened before the fork, is the
    child's too: the child's teardown writes it)."""
    suite = _suite_with_a_users_grader(tmp_path)
    (tmp_path / "g.py").write_text(
        "from ci_evals import grader, GradeResult\n"
        f"LOG = open({str(tmp_path / 'grader.log')!r}, 'w')\nLOG.write('graded')\n\n@grader\n"
        "def g(sample, submission):\n    return GradeResult(score=1.0)\n"
    )
    code, lines, left = ended(tmp_path, "validate", str(suite))
    assert code == 0
    assert (tmp_path / "grader.log").read_text() == "graded"
    assert left == TORN_DOWN
    assert lines.count("atexit ran") == 2


def test_a_users_file_that_fails_to_import_still_counts_as_run(tmp_path):
    suite = _suite_with_a_users_grader(tmp_path)
    (tmp_path / "g.py").write_text(
        f"LOG = open({str(tmp_path / 'grader.log')!r}, 'w')\n"
        "LOG.write('started')\nraise RuntimeError('no')\n"
    )
    code, _, left = ended(tmp_path, "validate", str(suite))
    assert code == 2
    assert (tmp_path / "grader.log").read_text() == "started"
    assert left == TORN_DOWN


def test_a_thread_that_exit_waits_for_keeps_pythons_exit(tmp_path):
    code, lines, _ = ended(tmp_path, "--thread", "list")
    assert code == 0
    assert lines[-2:] == ["thread finished", "atexit ran"]  # joined, 1.5 s after the command


def test_a_closed_pipe_ends_as_before(tmp_path):
    """`ci-evals list | head -1`: 141, as a shell reports a program SIGPIPE stopped
    (ci_evals.run.exits), whether the fast end is taken or not."""
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, str(tmp_path / "left"), "list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before anything is written
    proc.communicate(timeout=60)
    assert proc.returncode == 141
