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

Isolation: the code runs in a separate, stripped interpreter (no secrets in its environment, no
capability, a fresh temporary folder: :mod:`ci_evals.graders.python_worker`). A small pool of such
workers (``workers``, default min(4, CPUs)) serves the samples: the module's top-level code runs
once per worker, a worker serves at most 100 samples, and a worker whose sample failed in any way
is killed (with every process it started) and replaced, so one runaway sample never affects the
next.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import Field

from ci_evals._util.errors import ConfigError
from ci_evals._util.redact import scrub
from ci_evals.config.specs import MAX_TIMEOUT, Context, GraderSpec
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.base import Grader
from ci_evals.graders.python_worker import Worker, WorkerDied
from ci_evals.graders.string_check import error_grade

MAX_SOURCE_BYTES = 256 * 1024
MAX_TASKS_PER_WORKER = 100


def find_grade(body: list[ast.stmt]) -> ast.AST | None:
    """The module-level statement that defines ``grade`` (def, assignment or import), if any.

    Looks inside ``if``/``try``/``with``/loops at module level, not inside functions or classes.
    """
    found: ast.AST | None = None
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


class PythonGrader(Grader[PythonSpec]):
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
        self._idle: list[Worker] = []
        self._live: set[Worker] = set()
        self._load_error: dict[str, Any] | None = None

    def _spawn(self) -> Worker:
        worker = Worker(self.spec.memory_limit_mb * 1024 * 1024, self.filename)
        with self._lock:
            self._live.add(worker)
        return worker

    def _discard(self, worker: Worker) -> None:
        with self._lock:
            self._live.discard(worker)
        worker.kill()

    def _call(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One grade() call on a pooled worker under the time limit (runs in a pool thread)."""
        if self._load_error is not None:
            return self._load_error
        deadline = time.monotonic() + self.spec.timeout
        with self._lock:
            idle = self._idle.pop() if self._idle else None
        try:
            worker = idle if idle is not None else self._spawn()
            if idle is None:
                loaded = worker.ask({"source": self.spec.source}, deadline)
                if "error" in loaded:
                    loaded["error"] = f"running the source failed: {loaded['error']}"
                    self._load_error = loaded
                    self._discard(worker)
                    return loaded
            out = worker.ask(payload, deadline)
        except TimeoutError:
            out = {"error": f"timed out after {self.spec.timeout:g} s"}
        except WorkerDied as exc:
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
