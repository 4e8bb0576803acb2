"""A ``python`` grader's worker process: the interpreter user code runs in, and its line protocol.

Isolation: the code runs in a separate interpreter (``python -I``) whose working directory is a
fresh temporary folder, whose environment holds no secrets (only PATH, LANG, HOME/TMPDIR = that
folder, NLTK_DATA and the process-tree marker of :mod:`ci_evals._util.procs`), which holds no
capability (dropped from every set and the bounding set, with ``no_new_privs``: even as root it
cannot read the environ of ci-evals, which is non-dumpable during a run), and whose stdin/stdout
are not the protocol pipes (what the code prints is kept, cut to 2000 characters, in
``metadata.output``).

The protocol: the worker reads one JSON line ``{"source": ...}``, runs the source once and answers
with one JSON line (``error`` when it failed); then for every request line ``{"sample", "item"}``
it answers ``{"value": float}`` or ``{"error", "traceback"}``, with ``output`` holding what the
code printed (each at most 64 KB). The pool that hands samples to workers is
:class:`ci_evals.graders.python_grader.PythonGrader`.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from ci_evals._util.procs import MARKER, kill_tree, new_marker

# The worker: sets its limits, keeps private copies of the protocol pipes, runs the source once,
# then answers one JSON line per JSON request line.
WORKER = r"""
import contextlib, io, json, linecache, math, numbers, os, resource, sys, traceback
mem = int(sys.argv[1])
if mem > 0:
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
try:  # no capability (root's CAP_SYS_PTRACE/SYS_ADMIN/PERFMON read a non-dumpable parent's environ), ever again
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (EPERM without CAP_SETPCAP: nothing to drop)
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: no setuid program gives them back
    header, data = (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()
    libc.capset(header, data)
except (ImportError, OSError, AttributeError):
    pass
rx = os.fdopen(os.dup(0), "r", encoding="utf-8")
tx = os.fdopen(os.dup(1), "w", encoding="utf-8")
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
sys.stdin = open(os.devnull)
FILE = sys.argv[2]

def reply(obj):
    tx.write(json.dumps(obj) + "\n")
    tx.flush()

def failure(exc):
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != "<string>"]
    user = [f for f in frames if f.filename == FILE]
    where = f" (line {user[-1].lineno})" if user else ""
    text = "".join(traceback.format_exception_only(exc)).strip()
    tb = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames[-20:])) + text
    return {"error": text + where, "traceback": tb[-65536:]}

def run(fn):
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            out = {"value": fn()}
    except BaseException as exc:
        out = failure(exc)
    if buf.getvalue():
        out["output"] = buf.getvalue()[-65536:]
    return out

def check(out):
    v = out.get("value")
    if "error" in out:
        return out
    if not isinstance(v, numbers.Real):
        return {"error": f"grade() returned {type(v).__name__}, expected a number", **out, "value": None}
    try:
        v = float(v)
    except (OverflowError, ValueError) as exc:
        return {"error": f"grade() returned an invalid number: {exc}", **out, "value": None}
    if not math.isfinite(v):
        return {"error": f"grade() returned {v}, expected a finite number", **out, "value": None}
    return {**out, "value": v}

source = json.loads(rx.readline())["source"]
linecache.cache[FILE] = (len(source), None, source.splitlines(True), FILE)
ns = {"__name__": "__grader__", "__file__": FILE}
loaded = run(lambda: exec(compile(source, FILE, "exec"), ns))
loaded.pop("value", None)
if "error" not in loaded and not callable(ns.get("grade")):
    loaded["error"] = "the source defines no function 'grade(sample, item)'"
reply(loaded)
if "error" in loaded:
    sys.exit(0)
for line in rx:
    req = json.loads(line)
    reply(check(run(lambda: ns["grade"](req["sample"], req["item"]))))
"""


class WorkerDied(Exception):
    """The worker process exited or closed its pipe without answering."""


class Worker:
    """One worker process with its temporary folder; used from one thread at a time."""

    def __init__(self, memory_bytes: int, filename: str) -> None:
        self.folder = tempfile.mkdtemp(prefix="ci-evals-python-")
        self.marker = new_marker()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.folder,
            "TMPDIR": self.folder,
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONIOENCODING": "utf-8",
            MARKER: self.marker,
        }
        if "NLTK_DATA" in os.environ:
            env["NLTK_DATA"] = os.environ["NLTK_DATA"]
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", WORKER, str(memory_bytes), filename],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=self.folder,
                env=env,
                start_new_session=True,
            )
        except OSError:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None  # both opened as PIPE above
        self.stdin, self.stdout = stdin, stdout
        self.served = 0
        self._buf = b""

    def ask(self, message: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Send one JSON line and read the one-line answer before ``deadline`` (monotonic)."""
        try:
            self.stdin.write((json.dumps(message, default=str) + "\n").encode())
            self.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            raise WorkerDied(self._exit_reason()) from None
        return json.loads(self._readline(deadline))

    def _readline(self, deadline: float) -> bytes:
        fd = self.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(remaining * 1000):
                raise TimeoutError
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise WorkerDied(self._exit_reason())
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _exit_reason(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the grader process stopped answering"
        if code < 0:
            name = (
                signal.Signals(-code).name
                if -code in signal.Signals._value2member_map_
                else str(-code)
            )
            return f"the grader process was killed by {name} (out of memory?)"
        return f"the grader process exited with code {code}"

    def kill(self) -> None:
        """Kill the worker and anything it started (setsid'd children too); remove its folder."""
        kill_tree(self.proc.pid, self.marker)
        self.proc.wait()
        for pipe in (self.stdin, self.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)
