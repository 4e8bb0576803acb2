"""Command targets and python graders leave nothing running: timeouts, interruptions and
children that hold the pipes or leave the session (issue 15 item 9)."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ci_evals.cli.app import main
from ci_evals.targets import command
from tests.test_time_limits import sigint_when


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def wait_for_pids(folder: Path, count: int, limit: float = 20.0) -> list[int]:
    """The pids the agents wrote into ``folder`` (one file each), once ``count`` are there."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        files = sorted(folder.glob("*.pid"))
        texts = [f.read_text() for f in files]
        if len(files) >= count and all(t.endswith("\n") for t in texts):
            return [int(x) for t in texts for x in t.split()]
        time.sleep(0.02)
    raise AssertionError(f"the agents did not start: {sorted(folder.iterdir())}")


def gone(pids: list[int], limit: float = 3.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.02)
    return False


# The agent starts a child that inherits stdout (and, with SETSID, leaves the session), records
# both pids, then either answers and exits (LEAVE) or hangs.
AGENT = """
import json, os, subprocess, sys, time
s = json.load(sys.stdin)
child = subprocess.Popen(["sleep", "120"], start_new_session={setsid})
open(os.path.join({pids!r}, f"{{s['id']}}.pid"), "w").write(f"{{os.getpid()}} {{child.pid}}\\n")
if {leave}:
    print("yes", flush=True)
    sys.exit(0)
time.sleep(120)
"""


def command_suite(sd, *, setsid: bool, leave: bool, timeout: float, n: int = 1) -> Path:
    pids = sd.root / "pids"
    pids.mkdir()
    sd.write("agent.py", AGENT.format(setsid=setsid, leave=leave, pids=str(pids)))
    sd.write("dataset.jsonl", [{"id": i, "input": "q", "ground_truth": "yes"} for i in range(n)])
    sd.suite(
        {
            "name": "hang",
            "dataset": "dataset.jsonl",
            "target": {
                "kind": "command",
                "command": [sys.executable, "agent.py"],
                "timeout": timeout,
            },
            "graders": {"c": {"kind": "tool", "function": "contains"}},
            "gate": {"op": "gte", "value": 0.5},
            "max_concurrent": n,
        }
    )
    return pids


@pytest.mark.parametrize("setsid", [False, True], ids=["same-group", "left-the-session"])
def test_timeout_kills_every_agent_process_and_does_not_wait_for_held_pipes(sd, setsid):
    pids = command_suite(sd, setsid=setsid, leave=False, timeout=1)
    t0 = time.monotonic()
    assert sd.run() == 1
    took = time.monotonic() - t0
    assert sd.results()[0]["error"] == {
        "category": "target",
        "message": "command timed out after 1 s; stderr: ",
    }
    assert took < 4, f"{took:.1f} s"
    assert gone(wait_for_pids(pids, 1))


def test_an_answer_is_taken_although_a_leftover_child_holds_stdout(sd):
    pids = command_suite(sd, setsid=True, leave=True, timeout=60)
    t0 = time.monotonic()
    assert sd.run() == 0
    took = time.monotonic() - t0
    row = sd.results()[0]
    assert (row["error"], row["submission"]["c"], row["grades"]["c"]["score"]) == (None, "yes", 1.0)
    assert took < 5, f"{took:.1f} s"
    assert gone(wait_for_pids(pids, 1))


def test_sigint_exits_within_2_seconds_and_kills_every_agent_process(sd):
    pids = command_suite(sd, setsid=False, leave=False, timeout=300, n=3)
    # a second agent child that also left the session
    (sd.root / "agent.py").write_text(
        (sd.root / "agent.py")
        .read_text()
        .replace(
            "time.sleep(120)\n",
            'subprocess.Popen(["sleep", "121"], start_new_session=True)\ntime.sleep(120)\n',
        )
    )
    started: list[int] = []

    def ready() -> bool:
        if not started:
            started.extend(wait_for_pids(pids, 3))
            time.sleep(0.3)  # let the agents start their second child
        return True

    rc, err, took = sigint_when(sd, ready)
    assert rc == 130, err
    assert took < 2, f"{took:.2f} s"
    assert "interrupted: partial results written" in err
    assert gone(started)
    leftovers = subprocess.run(
        ["pgrep", "-f", "sleep 121"], capture_output=True, text=True
    ).stdout.split()
    assert not [p for p in leftovers if alive(int(p))]


def test_python_grader_children_that_call_setsid_are_reaped(sd, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    source = (
        "import subprocess\n"
        "def grade(sample, item):\n"
        "    p = subprocess.Popen(['sleep', '120'], start_new_session=True)\n"
        f"    open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "    return 1.0\n"
    )
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "a"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "a"}])
    sd.suite(
        {
            "name": "py",
            "dataset": "dataset.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {"p": {"kind": "python", "source": source, "workers": 1}},
            "gate": {"op": "gte", "value": 0.5},
        }
    )
    assert sd.run() == 0
    pid = int(pidfile.read_text())
    assert gone([pid]), f"grandchild {pid} outlived the run"


def test_command_in_a_missing_cwd_is_a_load_time_error(sd, capsys):
    sd.write("dataset.jsonl", [{"id": 1, "input": "q"}])
    sd.suite(
        {
            "name": "c",
            "dataset": "dataset.jsonl",
            "target": {"kind": "command", "command": "true", "cwd": "nowhere"},
            "graders": {"c": {"kind": "tool", "function": "contains"}},
        }
    )
    assert main(["validate", str(sd.root / "suite.yaml")]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"error: {sd.root / 'suite.yaml'}:6: target.cwd: folder not found: {sd.root / 'nowhere'}\n"
    )


def test_a_program_that_ignores_a_large_input_still_answers(sd, caplog):
    sd.write("agent.py", "print('yes')\n")
    sd.write("dataset.jsonl", [{"id": 1, "input": "x" * 3_000_000, "ground_truth": "yes"}])
    sd.suite(
        {
            "name": "c",
            "dataset": "dataset.jsonl",
            "target": {"kind": "command", "command": [sys.executable, "agent.py"], "timeout": 20},
            "graders": {"c": {"kind": "tool", "function": "contains"}},
            "gate": {"op": "gte", "value": 0.5},
        }
    )
    assert sd.run() == 0
    row = sd.results()[0]
    assert (row["error"], row["submission"]["c"]) == (None, "yes")
    gc.collect()  # Python 3.11.2 logs an untaken pipe error when its future is collected
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def test_feeding_stdin_takes_the_pipes_close_error():
    class Pipe:  # a StreamWriter whose reader went away: drain and the close both fail
        closed_awaited = False

        def write(self, data):
            pass

        async def drain(self):
            raise BrokenPipeError

        def close(self):
            pass

        async def wait_closed(self):
            Pipe.closed_awaited = True
            raise BrokenPipeError

    asyncio.run(command._feed(Pipe(), b"x"))
    assert Pipe.closed_awaited
