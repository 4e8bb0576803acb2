"""F16, F19, F10: SIGHUP, SIGTERM and SIGINT each end a run the same way (summary, verdict
interrupted, process trees killed, exit 128+n), fast, without asyncio's "Task was destroyed"
noise, also while a reward composer blocks; tracebacks Python prints itself are scrubbed."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.conftest import replay_suite
from tests.test_processes import command_suite, gone, wait_for_pids
from tests.test_time_limits import CLI

SIGNALS = [(signal.SIGHUP, 129), (signal.SIGTERM, 143), (signal.SIGINT, 130)]
NOISE = (
    "Task was destroyed",
    "Traceback",
    "Exception ignored",
    "never retrieved",
    "RuntimeWarning",
)


def _start(sd, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*CLI, "run", "suite.yaml", "--output", "out", "-q", "--no-cache", *extra],
        cwd=sd.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen, *signals: int, gap: float = 0.0) -> tuple[str, float]:
    t0 = time.monotonic()
    for sig in signals:
        if proc.poll() is not None:
            break
        proc.send_signal(sig)
        time.sleep(gap)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    return err, time.monotonic() - t0


@pytest.mark.parametrize(("sig", "code"), SIGNALS)
def test_each_terminating_signal_writes_the_summary_and_kills_every_tree(sd, sig, code):
    pids = command_suite(sd, setsid=True, leave=False, timeout=100, n=2)
    proc = _start(sd)
    running = wait_for_pids(pids, 2)  # two agents and their setsid'd children, all hanging
    err, took = _stop(proc, sig)
    assert proc.returncode == code, err
    assert took < 2.0, f"{took:.2f} s"
    summary = sd.summary()
    assert (summary["verdict"], summary["interrupted_by"], summary["partial"]) == (
        "interrupted",
        signal.Signals(sig).name,
        True,
    )
    assert gone(running), [p for p in running if os.path.exists(f"/proc/{p}")]
    assert "interrupted: partial results written to out/; finish with --resume out" in err
    assert not any(n in err for n in NOISE), err


@pytest.mark.parametrize(
    "order",
    [
        (signal.SIGHUP, signal.SIGINT, signal.SIGTERM),
        (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGHUP, signal.SIGTERM),
    ],
)
def test_rapid_mixed_signals_keep_the_first_and_print_no_asyncio_noise(sd, order):
    pids = command_suite(sd, setsid=False, leave=False, timeout=100, n=3)
    proc = _start(sd)
    running = wait_for_pids(pids, 3)
    first = order[0]
    proc.send_signal(first)
    time.sleep(
        0.05
    )  # Python runs pending handlers by signal number: the first must be alone to be first
    err, took = _stop(proc, *(order * 20), gap=0.002)  # then 60-100 more within about half a second
    assert proc.returncode == dict(SIGNALS)[first], err
    assert sd.summary()["interrupted_by"] == signal.Signals(first).name
    assert gone(running)
    assert not any(n in err for n in NOISE), err
    assert took < 3.0, f"{took:.2f} s"


def _composer_suite(sd, body: str) -> None:
    sd.write("dataset.jsonl", [{"id": i, "input": "q", "ground_truth": "a"} for i in range(4)])
    sd.write("outputs.jsonl", [{"id": i, "output": "a"} for i in range(4)])
    sd.write(
        "rewards.py",
        "import os, time\nfrom ci_evals import reward_composer\n\n@reward_composer\n"
        f"def compose(ctx):\n    {body}\n    return 1.0\n",
    )
    sd.write("started.py", "")
    sd.suite(
        replay_suite(
            {"acc": {"kind": "tool", "function": "exact_match"}},
            {"metric_key": "reward", "op": "gte", "value": 0.5},
            reward={"kind": "custom", "function": "rewards.py:compose"},
            max_concurrent=2,
        )
    )


@pytest.mark.parametrize(
    ("body", "sig", "code"),
    [
        ("open('busy', 'w').close(); time.sleep(600)", signal.SIGINT, 130),
        (
            "open('busy', 'w').close()\n    while True: pass",
            signal.SIGTERM,
            143,
        ),  # spinning: holds the GIL in turns
    ],
)
def test_a_blocking_reward_composer_never_delays_a_signal(sd, body, sig, code):
    _composer_suite(sd, body)
    proc = _start(sd)
    deadline = time.monotonic() + 30
    while not (sd.root / "busy").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # well inside the composer
    err, took = _stop(proc, sig)
    assert proc.returncode == code, err
    assert took < 2.0, f"{took:.2f} s"
    assert sd.summary()["verdict"] == "interrupted"
    assert not any(n in err for n in NOISE), err


def test_keyboard_interrupt_quoting_a_secret_from_a_composer_is_its_error_masked(sd):
    """F10 with F1: the composer's KeyboardInterrupt is that sample's error (exit 1, a summary),
    its text masked everywhere."""
    key = "sk-composer-" + "Vb3Nm5Qw7Er9Ty1Ui3Op"
    _composer_suite(sd, "raise KeyboardInterrupt('key=' + os.environ['COMPOSER_API_KEY'])")
    env = {**os.environ, "COMPOSER_API_KEY": key}
    proc = subprocess.run(
        [*CLI, "run", "suite.yaml", "--output", "out", "--no-cache"],
        cwd=sd.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    summary = sd.summary()
    assert (summary["verdict"], summary["metrics"]["reward"]["errors"]) == ("errored", 4)
    assert {r["grades"]["reward"]["error"] for r in sd.results()} == {
        "reward composer rewards.py:compose failed: KeyboardInterrupt('key=***')"
    }
    files = "".join(p.read_text(encoding="utf-8") for p in (sd.root / "out").iterdir())
    assert key[:16] not in proc.stdout + proc.stderr + files
    assert key[-16:] not in proc.stdout + proc.stderr + files


def test_tracebacks_python_prints_itself_are_scrubbed(sd):
    """A custom grader's own thread dies with the key in its message: Python's thread excepthook
    prints the traceback to stderr, masked."""
    key = "sk-thread-" + "Hj4Kl6Zx8Cv0Bn2Mq4Wt"
    sd.write(
        "g.py",
        "import os, threading\nfrom ci_evals import grader, GradeResult\n\n@grader\n"
        "def g(sample, submission):\n"
        "    def boom():\n        raise RuntimeError('leaked ' + os.environ['THREAD_API_KEY'][:22]"
        " + '\\n' + os.environ['THREAD_API_KEY'][22:])\n"
        "    t = threading.Thread(target=boom)\n    t.start()\n    t.join()\n"
        "    return GradeResult(score=1.0)\n",
    )
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "a"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "a"}])
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": "g.py:g"}}, {"op": "gte", "value": 0.5})
    )
    proc = subprocess.run(
        [*CLI, "run", "suite.yaml", "--output", "out", "-q", "--no-cache"],
        cwd=sd.root,
        env={**os.environ, "THREAD_API_KEY": key},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "RuntimeError: leaked ***\n" in proc.stderr
    )  # 22 characters: a piece, masked on its own line
    assert key[:16] not in proc.stderr and key[22:] in proc.stderr  # the 8 left are below a piece
