"""User code that closes descriptors 0, 1 or 2 (a grader's ``os.close(1)``) gets them back on
/dev/null as each call returns (ci_evals.usercode.contain.refill_stdio): otherwise the next file
this process opens takes the number, and the author's next ``os.close(1)``, or the stale owner of
the number, closes that file instead (junit.xml's spool in CI: "Bad file descriptor").

Each case runs in its own interpreter: it closes that process's real descriptors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

REPORT = """
import json, os
def state():
    out = {}
    for fd in (0, 1, 2):
        try:
            out[fd] = [os.readlink(f"/proc/self/fd/{fd}"), os.get_inheritable(fd)]
        except OSError:
            out[fd] = None
    return out
"""


def _child(body: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", REPORT + body],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return {int(k): v for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}


def _print(expr: str) -> str:
    """Print ``expr`` as JSON on the descriptor saved before anything was closed."""
    return f"os.write(SAVED, (json.dumps({expr}) + '\\n').encode())\n"


@pytest.mark.parametrize("closed", [(1, 2), (0, 2), (1,), (0, 1, 2)])
def test_the_closed_standard_descriptors_are_reopened_on_dev_null(closed):
    got = _child(
        "SAVED = os.dup(1)\n"
        "from ci_evals.usercode.contain import refill_stdio\n"
        f"before = state()\nfor fd in {closed!r}:\n    os.close(fd)\n"
        "refill_stdio()\n" + _print("{0: [before, state()]}")
    )
    before, after = got[0]
    for fd in (0, 1, 2):
        if fd in closed:
            assert after[str(fd)] == ["/dev/null", True]
        else:
            assert after[str(fd)] == before[str(fd)]  # left as it was


def test_nothing_is_opened_when_nothing_was_closed():
    got = _child(
        "SAVED = os.dup(1)\n"
        "from ci_evals.usercode.contain import refill_stdio\n"
        "before = sorted(os.listdir('/proc/self/fd'))\nrefill_stdio()\n"
        "after = sorted(os.listdir('/proc/self/fd'))\n" + _print("{0: before == after}")
    )
    assert got == {0: True}


@pytest.mark.parametrize("colour", ["def", "async def"])
def test_a_grader_closing_stdout_and_stderr_leaves_them_open_on_dev_null_after_its_call(colour):
    """Through the user-code lanes themselves (the thread, the user loop): the next file opened
    takes a number above 2."""
    got = _child(
        "SAVED = os.dup(1)\n"
        "import asyncio\n"
        "from ci_evals.usercode import lane\n"
        f"{colour} grader():\n    os.close(1)\n    os.close(2)\n    return 'graded'\n"
        "value = asyncio.run(lane.run(grader, what='the grader'))\n"
        "with open(os.devnull) as f:\n    next_fd = f.fileno()\n"
        + _print("{0: [value, next_fd, state()]}")
    )
    value, next_fd, after = got[0]
    assert value == "graded"
    assert next_fd > 2
    assert after["1"] == ["/dev/null", True] and after["2"] == ["/dev/null", True]


def test_a_module_closing_stdout_at_import_leaves_it_open_on_dev_null(tmp_path):
    (tmp_path / "closer.py").write_text("import os\nos.close(1)\n")
    got = _child(
        "SAVED = os.dup(1)\n"
        "from pathlib import Path\n"
        "from ci_evals.usercode.load import load_module\n"
        f"load_module(Path({str(tmp_path / 'closer.py')!r}))\n" + _print("{0: state()}")
    )
    assert got[0]["1"] == ["/dev/null", True]


def test_a_number_another_file_took_meanwhile_is_left_to_it(tmp_path):
    """Only free numbers are filled: a file that took descriptor 1 after user code closed it keeps
    it (replacing it would break that file, as the race this guards against does)."""
    got = _child(
        "SAVED = os.dup(1)\n"
        "from ci_evals.usercode.contain import refill_stdio\n"
        "os.close(1)\nos.close(2)\n"
        f"taken = os.open({str(tmp_path / 'mine.txt')!r}, os.O_CREAT | os.O_WRONLY)\n"
        "refill_stdio()\n" + _print("{0: [taken, state()]}")
    )
    taken, after = got[0]
    assert taken == 1
    assert after["1"] == [str(tmp_path / "mine.txt"), False]
    assert after["2"] == ["/dev/null", True]


def test_user_code_awaited_on_the_runs_own_loop_gets_them_back_too():
    """``contained()``: an agent factory or a setup script given the target's client."""
    got = _child(
        "SAVED = os.dup(1)\n"
        "from ci_evals.usercode.contain import contained\n"
        "with contained():\n    os.close(1)\n" + _print("{0: state()}")
    )
    assert got[0]["1"] == ["/dev/null", True]
