"""``python``: OpenAI's Python grader, run in worker processes with time and memory limits.

``source`` defines ``grade(sample, item) -> float``:

* ``sample`` = ``{"output_text": str, "output_json": <the submission parsed as JSON, or None>,
  "output_tools": [chat-completions tool calls], "choices": [one chat-completions choice]}``;
* ``item`` = the dataset row (``input``, ``ground_truth``, ``metadata``, extra columns...).

The return value must be a real number (``bool`` counts as 1/0); it is clamped to [0, 1] and the
raw value kept in ``metadata.raw_score``. An exception, a non-number, NaN, ±inf, exceeding the
time limit (``timeout``, default 120 s per sample) or the memory limit (``memory_limit_mb``,
default 2048, ``RLIMIT_AS`` of the worker) gives that sample score 0 with the error; the run goes
on. The source is compiled when the suite loads: a syntax error, no top-level ``grade`` or code over
256 KB is a ConfigError. ``image_tag`` is accepted and ignored (the code runs on this interpreter
and its installed packages).

Isolation: the code runs in a separate interpreter (``python -I``) whose working directory is a
fresh temporary folder, whose environment holds no secrets (only PATH, LANG, HOME/TMPDIR = that
folder, NLTK_DATA and the process-tree marker of :mod:`ci_evals._util.procs`), which holds no
capability (dropped from every set and the bounding set, with ``no_new_privs``: even as root it
cannot read the environ of ci-evals, which is non-dumpable during a run), and whose stdin/stdout are not the protocol pipes (what the code prints is
kept, cut to 2000 characters, in ``metadata.output``). A small pool of such workers (``workers``,
default min(4, CPUs)) serves the samples: the module's top-level code runs once per worker, a
worker serves at most 100 samples, and a worker whose sample failed in any way is killed (with
every process it started) and replaced, so one runaway sample never affects the next.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import Field

from ci_evals._util.errors import ConfigError
from ci_evals._util.procs import MARKER, kill_tree, new_marker
from ci_evals._util.redact import scrub
from ci_evals.config.specs import MAX_TIMEOUT, Context, GraderSpec
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.base import Grader
from ci_evals.graders.string_check import error_grade

MAX_SOURCE_BYTES = 256 * 1024
MAX_TASKS_PER_WORKER = 100

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


class _Died(Exception):
    """The worker process exited or closed its pipe without answering."""


class _Worker:
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
        self.served = 0
        self._buf = b""

    def ask(self, message: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Send one JSON line and read the one-line answer before ``deadline`` (monotonic)."""
        try:
            self.proc.stdin.write((json.dumps(message, default=str) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            raise _Died(self._exit_reason()) from None
        return json.loads(self._readline(deadline))

    def _readline(self, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(remaining * 1000):
                raise TimeoutError
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise _Died(self._exit_reason())
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
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)


def find_grade(body: list[ast.stmt]) -> ast.AST | None:
    """The module-level statement that defines ``grade`` (def, assignment or import), if any.

    Looks inside ``if``/``try``/``with``/loops at module level, not inside functions or classes.
    """
    found = None
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == "grade":
                found = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "grade" for t in targets):
                found = node
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any((a.asname or a.name.split(".")[0]) == "grade" for a in node.names):
                found = node
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    found = find_grade(inner) or found
    return found


def check_signature(node: ast.AST) -> str | None:
    """Why a ``def grade`` cannot be called as ``grade(sample, item)``, or None."""
    if isinstance(node, ast.AsyncFunctionDef):
        return "'grade' must be a plain function, not async"
    if not isinstance(node, ast.FunctionDef):
        return None
    a = node.args
    positional = len(a.posonlyargs) + len(a.args)
    required = positional - len(a.defaults)
    if (positional < 2 and a.vararg is None) or required > 2:
        return "'grade' must take two positional arguments: grade(sample, item)"
    if any(d is None for d in a.kw_defaults):
        return "'grade' has a required keyword-only argument; it is called as grade(sample, item)"
    return None


class PythonSpec(GraderSpec):
    source: str = Field(description="Python code defining grade(sample, item) -> float.")
    image_tag: str | None = Field(
        default=None, description="Accepted for OpenAI compatibility; ignored."
    )
    timeout: float = Field(default=120.0, gt=0, le=MAX_TIMEOUT, description="Seconds per sample.")
    memory_limit_mb: int = Field(
        default=2048, ge=64, description="Address-space limit of a worker."
    )
    workers: int | None = Field(
        default=None, ge=1, le=64, description="Worker processes (default min(4, CPUs))."
    )


class PythonGrader(Grader):
    """Run user ``grade(sample, item)`` code in limited worker processes."""

    spec_model = PythonSpec

    def __init__(self, name: str, spec: PythonSpec, ctx: Context) -> None:
        super().__init__(name, spec, ctx)
        size = len(spec.source.encode("utf-8"))
        if size > MAX_SOURCE_BYTES:
            raise ConfigError(f"source: {size} bytes, over the 256 KB limit")
        self.filename = f"<python grader {name}>"
        try:
            tree = ast.parse(spec.source, self.filename)
            compile(tree, self.filename, "exec")
        except SyntaxError as exc:
            raise ConfigError(f"source: syntax error at line {exc.lineno}: {exc.msg}") from None
        node = find_grade(tree.body)
        if node is None:
            raise ConfigError("source: no top-level function 'grade(sample, item)' is defined")
        problem = check_signature(node)
        if problem:
            raise ConfigError(f"source: {problem}")
        self.size = spec.workers or min(4, os.cpu_count() or 1)
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._live: set[_Worker] = set()
        self._load_error: dict[str, Any] | None = None

    def _spawn(self) -> _Worker:
        worker = _Worker(self.spec.memory_limit_mb * 1024 * 1024, self.filename)
        with self._lock:
            self._live.add(worker)
        return worker

    def _discard(self, worker: _Worker) -> None:
        with self._lock:
            self._live.discard(worker)
        worker.kill()

    def _call(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One grade() call on a pooled worker under the time limit (runs in a pool thread)."""
        if self._load_error is not None:
            return self._load_error
        deadline = time.monotonic() + self.spec.timeout
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        try:
            if worker is None:
                worker = self._spawn()
                loaded = worker.ask({"source": self.spec.source}, deadline)
                if "error" in loaded:
                    loaded["error"] = f"running the source failed: {loaded['error']}"
                    self._load_error = loaded
                    self._discard(worker)
                    return loaded
            out = worker.ask(payload, deadline)
        except TimeoutError:
            out = {"error": f"timed out after {self.spec.timeout:g} s"}
        except _Died as exc:
            out = {"error": str(exc)}
        except OSError as exc:  # could not start a process
            return {"error": f"could not start the grader process: {exc}"}
        if "error" not in out:
            worker.served += 1
            if worker.served < MAX_TASKS_PER_WORKER:
                with self._lock:
                    self._idle.append(worker)
                return out
        self._discard(worker)
        return out

    async def grade(self, sample: Sample, submission: str, trajectory: Trajectory) -> GradeResult:
        tools = [tc.to_openai() for tc in trajectory.tool_calls()]
        try:
            output_json = json.loads(submission)
        except ValueError:
            output_json = None
        payload_sample = {
            "output_text": submission,
            "output_json": output_json,
            "output_tools": tools,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls" if tools else "stop",
                    "message": {
                        "role": "assistant",
                        "content": submission,
                        **({"tool_calls": tools} if tools else {}),
                    },
                }
            ],
        }
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                self.size, thread_name_prefix=f"python-grader-{self.name}"
            )
        loop = asyncio.get_running_loop()
        out = await loop.run_in_executor(
            self._executor, self._call, {"sample": payload_sample, "item": sample.item()}
        )
        # The worker sends at most 64 KB; scrub that whole, then keep the end (a cut first could
        # leave part of a secret).
        meta = {
            k: scrub(out[k])[-limit:]
            for k, limit in (("output", 2000), ("traceback", 4000))
            if k in out
        }
        if "error" in out:
            return error_grade(f"python grader: {out['error']}", **meta)
        raw = out["value"]
        score = min(1.0, max(0.0, raw))
        meta["raw_score"] = raw
        note = "" if score == raw else f", clamped to {score:g}"
        return GradeResult(score=score, rationale=f"grade() returned {raw:g}{note}", metadata=meta)

    async def aclose(self) -> None:
        """Kill every worker (a busy one too: its thread then returns at once) and stop the threads."""
        with self._lock:
            workers, self._live, self._idle = list(self._live), set(), []
        for w in workers:
            w.kill()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
