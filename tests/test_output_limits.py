"""F13: what a command writes and what an HTTP target answers are read up to a documented cap
(``max_output_mb`` / ``max_response_mb``, default 8 MiB); more is an error for that sample, and
peak memory stays flat (measured as the child's peak RSS)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across fork and exec, so a child of a big pytest
# process would report the parent's peak.
MEASURE = r"""
import json, re, sys
from ci_evals.cli.app import main
rc = main(sys.argv[1:])
hwm = int(re.search(r"VmHWM:\s+(\d+) kB", open("/proc/self/status").read()).group(1))
print(json.dumps({"rc": rc, "peak_mb": hwm / 1024}))
"""


def _run(root: Path, target: dict, n: int = 2) -> tuple[int, float, list[dict]]:
    (root / "dataset.jsonl").write_text(
        "".join(json.dumps({"id": i, "input": "q", "ground_truth": "y"}) + "\n" for i in range(n))
    )
    suite = {
        "name": "big",
        "dataset": "dataset.jsonl",
        "cache": False,
        "target": target,
        "max_concurrent": n,
        "graders": {"c": {"kind": "tool", "function": "contains"}},
        "gate": {"op": "gte", "value": 0.5},
    }
    (root / "suite.yaml").write_text(json.dumps(suite))
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, "run", "suite.yaml", "-o", "out", "-q"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=180,
    )
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = [json.loads(x) for x in (root / "out" / "results.jsonl").read_text().splitlines()]
    return last["rc"], last["peak_mb"], rows


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (
            "import sys\nsys.stdin.read()\nwhile True:\n    sys.stdout.write('y' * 65536)\n",  # like `yes`
            "command wrote more than 8 MiB to stdout (max_output_mb); it was stopped",
        ),
        (
            "import sys\nsys.stdin.read()\nsys.stdout.write('{\"output\": \"' + 'y' * (40 << 20) + '\"}')\n",  # one huge JSON
            "command wrote more than 8 MiB to stdout (max_output_mb); it was stopped",
        ),
    ],
)
def test_a_command_flooding_stdout_is_an_error_with_flat_memory(tmp_path, program, message):
    (tmp_path / "flood.py").write_text(program)
    rc, peak, rows = _run(
        tmp_path, {"kind": "command", "command": [sys.executable, "flood.py"], "timeout": 60}
    )
    assert rc == 1
    assert [r["error"] for r in rows] == [{"category": "target", "message": message}] * 2
    assert peak < 200, f"{peak:.0f} MB"


def test_stderr_flood_keeps_only_its_tail(tmp_path):
    (tmp_path / "noisy.py").write_text(
        "import sys\nsys.stdin.read()\nfor _ in range(2000):\n"
        "    sys.stderr.write('e' * 65536)\nsys.stderr.write('THE END')\nsys.exit(3)\n"
    )
    rc, peak, rows = _run(
        tmp_path, {"kind": "command", "command": [sys.executable, "noisy.py"], "timeout": 60}
    )
    assert rc == 1 and peak < 200, f"{peak:.0f} MB"
    assert all(
        r["error"]["message"].startswith("command exited with code 3; stderr: ")
        and r["error"]["message"].endswith("THE END")
        for r in rows
    )


def test_a_lower_cap_from_the_suite(tmp_path):
    (tmp_path / "big.py").write_text("import sys\nsys.stdin.read()\nprint('y' * 3_000_000)\n")
    rc, _, rows = _run(
        tmp_path, {"kind": "command", "command": [sys.executable, "big.py"], "max_output_mb": 1}
    )
    assert [r["error"]["message"] for r in rows] == [
        "command wrote more than 1 MiB to stdout (max_output_mb); it was stopped"
    ] * 2


class Huge(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    size = 300 << 20

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(self.size))
        self.end_headers()
        chunk = b"y" * (1 << 20)
        try:
            for _ in range(self.size >> 20):
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass


def test_a_huge_http_body_is_an_error_with_flat_memory(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Huge)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        rc, peak, rows = _run(
            tmp_path, {"kind": "http", "url": f"http://127.0.0.1:{server.server_address[1]}/"}
        )
    finally:
        server.shutdown()
        server.server_close()
    assert rc == 1
    assert [r["error"]["message"] for r in rows] == [
        "HTTP target response is larger than 8 MiB (max_response_mb)"
    ] * 2
    assert peak < 200, f"{peak:.0f} MB"
