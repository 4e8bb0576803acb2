"""Nothing blocks without bound: catastrophic regexes, slow-drip servers, signals during the flush
(issue 15 items 10, 11, 12)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import replay_suite
from tests.fakes.letta_server import letta_fake_fixture  # noqa: F401 - provides `letta_fake`

CLI = [sys.executable, "-m", "ci_evals"]


def cli(root: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=root, capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------- item 10: catastrophic regexes


def test_catastrophic_regex_match_is_a_bounded_error_grade(sd):
    evil = "a" * 60 + "b"
    sd.write(
        "dataset.jsonl",
        [
            {"id": 1, "input": "q", "ground_truth": "^(a+)+$"},
            {"id": 2, "input": "q", "ground_truth": "^(a|aa)+$"},
            {"id": 3, "input": "q", "ground_truth": "^a+b$"},
        ],
    )
    sd.write("outputs.jsonl", [{"id": i, "output": evil} for i in (1, 2, 3)])
    sd.suite(
        replay_suite(
            {"r": {"kind": "tool", "function": "regex_match"}}, {"op": "gte", "value": 0.5}
        )
    )
    t0 = time.monotonic()
    proc = cli(sd.root, "run", "suite.yaml", "--output", "out", "-q", "--no-cache")
    assert time.monotonic() - t0 < 15
    assert proc.returncode == 1, proc.stderr
    grades = {r["sample_id"]: r["grades"]["r"] for r in sd.results()}
    assert (grades[1]["score"], grades[1]["error"]) == (0.0, None)
    assert grades[2]["error"] == (
        "regex '^(a|aa)+$' took over 1 s on a 61-character text (catastrophic backtracking?)"
    )
    assert (grades[3]["score"], grades[3]["error"]) == (1.0, None)


def test_catastrophic_pattern_extractor_is_an_extraction_error(sd):
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "x"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "a" * 60 + "b"}])
    sd.suite(
        replay_suite(
            {
                "c": {
                    "kind": "tool",
                    "function": "contains",
                    "extractor": "pattern",
                    "extractor_config": {"pattern": "^(a|aa)+$"},
                }
            },
            {"op": "gte", "value": 0.5},
        )
    )
    proc = cli(sd.root, "run", "suite.yaml", "--output", "out", "-q", "--no-cache")
    assert proc.returncode == 1, proc.stderr
    grade = sd.results()[0]["grades"]["c"]
    assert grade["error_category"] == "extraction"
    assert grade["error"] == (
        "extractor 'pattern' failed: RegexTimeout: regex '^(a|aa)+$' took over 1 s "
        "on a 61-character text (catastrophic backtracking?)"
    )


def sigint_when(sd, ready, out: str = "out") -> tuple[int, str, float]:
    """Run the suite in a subprocess, send SIGINT once ``ready()``; (exit code, stderr, seconds to exit)."""
    proc = subprocess.Popen(
        [*CLI, "run", "suite.yaml", "--output", out, "-q", "--no-cache"],
        cwd=sd.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not ready():
            time.sleep(0.02)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        return proc.returncode, err, time.monotonic() - t0
    finally:
        proc.kill()


def _sigint_during(sd, out: str = "out") -> tuple[int, str, float]:
    results = sd.root / out / "results.jsonl"
    return sigint_when(sd, lambda: results.exists() and results.read_text().count("\n") >= 1, out)


def test_sigint_is_honoured_within_2_seconds_during_catastrophic_regexes(sd):
    sd.write(
        "dataset.jsonl", [{"id": i, "input": "q", "ground_truth": "^(a|aa)+$"} for i in range(30)]
    )
    sd.write("outputs.jsonl", [{"id": i, "output": "a" * 80 + "b"} for i in range(30)])
    sd.suite(
        replay_suite(
            {"r": {"kind": "tool", "function": "regex_match"}}, {"op": "gte", "value": 0.5}
        )
    )
    rc, err, took = _sigint_during(sd)
    assert rc == 130, err
    assert took < 2, f"{took:.2f} s"
    assert sd.summary()["partial"] is True
    assert 1 <= len(sd.results()) < 30


# ---------------------------------------------------------------- item 11: repeated signals


def _slow_command_suite(sd, n=12):
    sd.write(
        "agent.py",
        "import json, sys, time\ns = json.load(sys.stdin)\ntime.sleep(0.2)\nprint('yes')\n",
    )
    sd.write("dataset.jsonl", [{"id": i, "input": "q", "ground_truth": "yes"} for i in range(n)])
    sd.suite(
        {
            "name": "slow",
            "dataset": "dataset.jsonl",
            "target": {"kind": "command", "command": [sys.executable, "agent.py"]},
            "graders": {"c": {"kind": "tool", "function": "contains"}},
            "gate": {"op": "gte", "value": 0.5},
            "max_concurrent": 2,
        }
    )


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_repeated_signals_do_not_lose_the_partial_summary(sd, sig, code):
    """The first signal stops the run; more of them, every 10 ms, must not stop the flush."""
    _slow_command_suite(sd)
    proc = subprocess.Popen(
        [*CLI, "run", "suite.yaml", "--output", "out", "-q"],
        cwd=sd.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        results = sd.root / "out" / "results.jsonl"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            results.exists() and results.read_text().count("\n") >= 2
        ):
            time.sleep(0.02)
        for _ in range(300):  # at most 3 s of signals
            if proc.poll() is not None:
                break
            proc.send_signal(sig)
            time.sleep(0.01)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    summary = json.loads((sd.root / "out" / "summary.json").read_text())
    assert summary["partial"] is True and summary["interrupted_by"] == signal.Signals(sig).name
    assert summary["records"] == len(sd.results())
    assert "interrupted: partial results written to out/; finish with --resume out" in err


# ---------------------------------------------------------------- item 12: total deadlines


class Drip:
    """A loopback HTTP server that answers 200 with a body sent one byte per ``every`` seconds."""

    def __init__(self, body: bytes, every: float = 0.5) -> None:
        self.body, self.every = body, every
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(self.body)
                )
                for i in range(len(self.body)):
                    if self.stop.wait(self.every):
                        return
                    conn.sendall(self.body[i : i + 1])
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        self.thread.join(timeout=5)


@pytest.fixture
def drip():
    server = Drip(json.dumps({"output": "yes", "padding": "x" * 60}).encode())
    yield server
    server.close()


def test_http_target_timeout_is_a_total_deadline(sd, drip):
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "yes"}])
    sd.suite(
        {
            "name": "h",
            "dataset": "dataset.jsonl",
            "target": {"kind": "http", "url": drip.url, "timeout": 1},
            "graders": {"c": {"kind": "tool", "function": "contains"}},
            "gate": {"op": "gte", "value": 0.5},
        }
    )
    t0 = time.monotonic()
    assert sd.run() == 1
    took = time.monotonic() - t0
    assert sd.results()[0]["error"] == {
        "category": "target",
        "message": "HTTP target timed out after 1 s",
    }
    assert took < 5, f"{took:.1f} s"


@pytest.mark.parametrize("aiohttp", [True, False])
def test_model_target_timeout_is_a_total_deadline(sd, drip, monkeypatch, aiohttp):
    from ci_evals.llm import transport

    monkeypatch.setattr(transport, "USE_AIOHTTP", aiohttp)
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "yes"}])
    sd.suite(
        {
            "name": "m",
            "dataset": "dataset.jsonl",
            "target": {
                "kind": "model",
                "model": "m",
                "base_url": drip.url + "/v1",
                "timeout": 1,
                "max_retries": 0,
            },
            "graders": {"c": {"kind": "tool", "function": "contains"}},
            "gate": {"op": "gte", "value": 0.5},
        }
    )
    t0 = time.monotonic()
    assert sd.run() == 1
    took = time.monotonic() - t0
    assert (
        sd.results()[0]["error"]["message"]
        == f"model call failed on turn 1: {drip.url}/v1/chat/completions: timed out after 1 s"
    )
    assert took < 5, f"{took:.1f} s"


def test_judge_timeout_is_a_total_deadline(sd, drip):
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "yes"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "yes"}])
    sd.suite(
        replay_suite(
            {
                "j": {
                    "kind": "score_model",
                    "model": "judge",
                    "base_url": drip.url + "/v1",
                    "timeout": 1,
                    "max_retries": 0,
                    "input": [{"role": "user", "content": "Rate {{ sample.output_text }}"}],
                }
            },
            {"op": "gte", "value": 0.5},
        )
    )
    t0 = time.monotonic()
    assert sd.run() == 1
    took = time.monotonic() - t0
    grade = sd.results()[0]["grades"]["j"]
    assert grade["error_category"] == "grading"
    assert f"{drip.url}/v1/chat/completions: timed out after 1 s" in grade["error"]
    assert took < 5, f"{took:.1f} s"


# ---------------------------------------------------------------- item 10: custom graders and extractors

SLOW_CODE = (
    "import time\nfrom ci_evals import grader, extractor, GradeResult\n\n"
    "@grader\ndef slow(sample, submission):\n"
    "    if sample.input == 'stuck':\n        time.sleep(30)\n"
    "    return GradeResult(score=1.0)\n\n"
    "@extractor\ndef slow_ex(trajectory, config):\n"
    "    text = trajectory[-1][-1].content\n"
    "    if text == 'stuck':\n        time.sleep(30)\n"
    "    return text\n"
)


def _custom_suite(sd, grader: dict, inputs: list[str]):
    sd.write("g.py", SLOW_CODE)
    sd.write(
        "dataset.jsonl", [{"id": i, "input": x, "ground_truth": "ok"} for i, x in enumerate(inputs)]
    )
    sd.write("outputs.jsonl", [{"id": i, "output": x} for i, x in enumerate(inputs)])
    sd.suite(replay_suite({"g": grader}, {"op": "gte", "value": 0.5}, max_concurrent=1))


def test_a_stuck_custom_grader_is_abandoned_after_its_time_limit(sd, monkeypatch):
    from ci_evals.usercode import lane as usercode

    monkeypatch.setattr(usercode, "USER_CODE_SECONDS", 0.5)
    _custom_suite(sd, {"kind": "tool", "function": "g.py:slow"}, ["fine", "stuck", "fine"])
    t0 = time.monotonic()
    assert sd.run() == 1  # the abandoned grade is an error: verdict errored
    assert time.monotonic() - t0 < 5
    grades = [r["grades"]["g"] for r in sorted(sd.results(), key=lambda r: r["sample_id"])]
    assert [(g["score"], g["error"]) for g in grades] == [
        (1.0, None),
        (None, "grader 'g.py:slow' took over 0.5 s and was abandoned"),
        (1.0, None),
    ]


def test_a_stuck_custom_extractor_is_abandoned_after_its_time_limit(sd, monkeypatch):
    from ci_evals.usercode import lane as usercode

    monkeypatch.setattr(usercode, "USER_CODE_SECONDS", 0.5)
    _custom_suite(
        sd, {"kind": "tool", "function": "contains", "extractor": "g.py:slow_ex"}, ["ok", "stuck"]
    )
    t0 = time.monotonic()
    assert sd.run() == 1  # the abandoned extraction is an error: verdict errored
    assert time.monotonic() - t0 < 5
    grades = [r["grades"]["g"] for r in sorted(sd.results(), key=lambda r: r["sample_id"])]
    assert grades[0]["score"] == 1.0
    assert (grades[1]["error_category"], grades[1]["error"]) == (
        "extraction",
        "extractor 'g.py:slow_ex' failed: UserCodeTimeout: extractor 'g.py:slow_ex' took over 0.5 s "
        "and was abandoned",
    )


def test_sigint_is_honoured_within_2_seconds_while_a_custom_grader_spins(sd):
    sd.write(
        "g.py",
        "from ci_evals import grader, GradeResult\n\n@grader\ndef spin(sample, submission):\n"
        "    while True:\n        pass\n",
    )
    sd.write("dataset.jsonl", [{"id": i, "input": "q", "ground_truth": "ok"} for i in range(5)])
    sd.write("outputs.jsonl", [{"id": i, "output": "ok"} for i in range(5)])
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": "g.py:spin"}}, {"op": "gte", "value": 0.5})
    )
    started = time.monotonic()
    rc, err, took = sigint_when(sd, lambda: time.monotonic() - started > 2)  # loaded, and spinning
    assert rc == 130, err
    assert took < 2, f"{took:.2f} s"
    assert sd.summary()["partial"] is True


def test_letta_judge_timeout_bounds_the_whole_judge_call(letta_fake, tmp_path):
    """Each request answers within the timeout (0.6 s of 1 s), but together they would not."""
    from tests.fakes.letta_server import tool_call
    from tests.test_letta_judge import grade, make

    def slow_judge(fake, agent, text):
        time.sleep(0.6)
        return [tool_call("submit_grade", {"score": 1.0, "rationale": "fine"}, "call-1")]

    letta_fake.behaviours["judge"] = slow_judge
    letta_fake.fail("POST", "/v1/agents/import", status=None, hang=0.6)  # the import answers late
    judge = make(tmp_path, letta_fake, timeout=1, model="openai/gpt-4o-mini")
    t0 = time.monotonic()
    result = grade(judge, "score=1")
    took = time.monotonic() - t0
    assert (result.score, result.error) == (0.0, "Letta judge timed out after 1 s")
    assert took < 2.5, f"{took:.1f} s"
