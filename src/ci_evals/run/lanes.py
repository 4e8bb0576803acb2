"""Worker processes for a CPU-bound run: recorded outputs graded by built-in tool graders.

Such a run does nothing but compute in this process (no call, no service, no shared limit), so one
process uses one core: 100,000 replayed samples spent two thirds of their time on one core of two.
When a run is CPU-bound (:meth:`~ci_evals.run.runner.Runner.cpu_only`), has at least
:data:`MIN_JOBS` jobs, and the machine (Linux) lets this process use two cores or more, the run is
split once the suite is loaded and checked: one worker process per usable core (at most
:data:`MAX_WORKERS`), forked with the loaded suite. The selected samples are shared out as the
run goes (:class:`Share`): in blocks of consecutive samples, each taken by the first process
to ask, so a process on a slower core takes fewer and all of them finish together (cores of a
shared machine differ in speed from minute to minute: a fixed half each left one core idle for a
fifth of the run). Each worker writes its records to a part file in the output folder
(:mod:`ci_evals.run.parts`); this process runs its own share into results.jsonl, then appends
each part's complete lines and feeds them to the one aggregator, as ``--resume`` feeds an
earlier run's lines. The summary is
therefore the same function of the same records; only the order of results.jsonl's lines
differs (worker by worker), and summary.json's ``workers`` says how many processes ran.

Fail closed: a worker that dies (a signal, an internal error) keeps the lines it wrote, the run is
``partial``, summary.json's ``workers.failed`` and stderr name the worker and how it ended, and
``--resume`` runs what is missing. A signal to this process reaches the workers too; each stops
as a single run does, and its lines are kept. A worker dies with this process when it is killed
outright (SIGKILL): ``--resume`` then takes the lines left in the part files as done.

``CI_EVALS_WORKERS=1`` keeps every run in one process; ``CI_EVALS_WORKERS=N`` asks for N worker
processes for any CPU-bound run, however small (tests use it).
"""

from __future__ import annotations

import asyncio
import mmap
import os
import signal
import struct
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

import orjson

from ci_evals._util import forks
from ci_evals._util.redact import scrub
from ci_evals.results.records import ResultRecord, Summary, Workers
from ci_evals.results.writer import write_text
from ci_evals.run import parts
from ci_evals.run.exits import INTERRUPTED, ExitCode
from ci_evals.run.folderlock import ResumedJobs
from ci_evals.run.progress import Note, Progress, errored
from ci_evals.run.runner import Runner
from ci_evals.run.signals import held_now

MIN_JOBS = 20_000
"""Fewer jobs than this run in one process: a fork and a merge cost more than they save."""
MAX_WORKERS = 8
_COUNTS = struct.Struct("<qq")  # one slot per worker in a shared page: (samples done, with errors)
_POLL_S = 0.02
BLOCKS = 1024
"""At most this many blocks of samples are shared out (a block of 100k samples: about 100)."""
_BLOCK = struct.Struct("<i")


class Share:
    """Which selected samples this process runs, decided as it goes (see the module).

    Every iteration over the dataset (one per model) numbers its selected samples 0, 1, 2...;
    the iterations laid end to end are cut into blocks of ``block`` samples. The block numbers
    wait in a pipe, written whole before the fork, in order: reading 4 bytes takes the next block
    (the kernel gives each read to one reader); an empty pipe with no writer left means none is
    left. A process holds a block until it moves past it, then takes the next one, skipping the
    blocks others took meanwhile. A process that dies loses only the block it held.
    """

    def __init__(self, count: int, passes: int) -> None:
        self.count = count
        total = max(1, count * passes)
        self.block = -(-total // BLOCKS)
        ids = range(
            -(-total // self.block)
        )  # at most BLOCKS: 4 KiB, what a pipe's first page holds
        self.fd, write = os.pipe()
        try:
            os.write(write, b"".join(_BLOCK.pack(i) for i in ids))
        finally:
            os.close(write)
        self.passes = 0
        self.last = -1  # the ordinal asked last: a smaller one starts the next iteration
        self.held = -1
        self.done = False

    def owns(self, ordinal: int) -> bool:
        """Whether this process runs sample ``ordinal`` of the current iteration (asked once each,
        in increasing order); False and :attr:`done` once every block is taken."""
        if ordinal <= self.last:
            self.passes += 1
        self.last = ordinal
        wanted = (self.passes * self.count + ordinal) // self.block
        while self.held < wanted and not self.done:
            got = os.read(self.fd, _BLOCK.size)
            if len(got) < _BLOCK.size:
                self.done = True
            else:
                self.held = _BLOCK.unpack(got)[0]
        return self.held == wanted

    def close(self) -> None:
        os.close(self.fd)


def worker_count(runner: Runner) -> int:
    """How many processes run ``runner``'s jobs: 1 unless the run is CPU-bound (see the module)."""
    asked = forks.requested()
    if asked == 1 or not forks.can_fork() or not runner.cpu_only():
        return 1
    jobs = runner.total_jobs()
    if asked is not None:
        return max(1, min(asked, jobs))
    if jobs < MIN_JOBS:
        return 1
    return max(1, min(forks.usable_cores(), MAX_WORKERS))


def execute(runner: Runner) -> Summary:
    """Run every job of ``runner``, in worker processes when that pays; the run's summary.

    ``--resume`` checks before it writes: results.jsonl is read and checked first, then every line
    of the part files a killed run left, then those are appended; a bad line, or a record of a job
    this run does not have (:class:`~ci_evals.run.folderlock.ResumedJobs`), is one ConfigError
    naming it, and results.jsonl is left as it was."""
    jobs = ResumedJobs(runner.suite) if runner.opts.resume else None
    if jobs is not None:
        runner.load_previous()
        for key in runner.done_keys:
            jobs.check(key, runner.opts.output / runner.opts.results_name)
    parts.settle(runner, jobs)
    n = worker_count(runner)
    if n == 1:
        return asyncio.run(runner.execute())
    return _execute_split(runner, n)


class _Tally:
    """A worker's progress line: its counts in the shared page that the first process shows."""

    def __init__(self, shared: mmap.mmap, k: int) -> None:
        self.shared, self.offset = shared, _COUNTS.size * k
        self.done = self.errors = 0
        self.note: Note = lambda: None

    def advance(self, rec: ResultRecord) -> None:
        self.done += 1
        self.errors += errored(rec)
        _COUNTS.pack_into(self.shared, self.offset, self.done, self.errors)

    def close(self) -> None:
        pass


def _peer_counts(shared: mmap.mmap, n: int) -> tuple[int, int]:
    done = errors = 0
    for k in range(1, n):
        d, e = _COUNTS.unpack_from(shared, _COUNTS.size * k)
        done, errors = done + d, errors + e
    return done, errors


def _worker(runner: Runner, k: int, n: int, part: Path, shared: mmap.mmap) -> NoReturn:
    """Worker k's life in the forked process: its share of the jobs into ``part``; never returns."""
    code: int = ExitCode.INTERNAL
    try:
        worker = runner.for_worker(part.name)
        interrupted = asyncio.run(worker.run_records(_Tally(shared, k))).interrupted
        write_text(
            parts.state_file(part), orjson.dumps(worker.agg.state()).decode("utf-8")
        )  # after every line
        code = ExitCode.of_signal(interrupted) if interrupted is not None else ExitCode.PASSED
    except BaseException:  # an internal error: the first process reports the worker as failed
        print(
            scrub(f"ci-evals worker {k} of {n}: internal error\n{traceback.format_exc()}"),
            file=sys.stderr,
        )
    finally:
        sys.stderr.flush()
        os._exit(code)  # no cleanup of the first process's state (its lock, its buffers) runs here


def _execute_split(runner: Runner, n: int) -> Summary:
    out = runner.opts.output
    out.mkdir(parents=True, exist_ok=True)
    runner.load_previous()  # before the fork: every process skips the jobs already done
    for k in range(1, n):
        parts.free(parts.part_file(out, k))
    total = runner.total_jobs()
    shared = mmap.mmap(-1, _COUNTS.size * n)  # anonymous and shared: the workers' counts
    workers: dict[int, tuple[int, Path]] = {}  # pid -> (k, its part file)
    dataset = runner.suite.dataset
    dataset.lane = Share(dataset.count, len(runner.suite.target.models()))
    sys.stdout.flush()  # what is buffered now must not be written once by each process
    sys.stderr.flush()
    try:
        for k in range(1, n):
            part = parts.part_file(out, k)
            pid = forks.fork()  # a worker dies with this process
            if pid == 0:
                _worker(runner, k, n, part, shared)
            workers[pid] = (k, part)
    except (
        OSError
    ) as exc:  # no process to be had (EAGAIN, ENOMEM): the whole run here, as if never split
        _signal(workers, signal.SIGKILL)
        for pid, (_, part) in workers.items():
            os.waitpid(pid, 0)
            parts.discard(part)
        print(
            f"warning: could not start worker processes ({exc.strerror or exc}): the run uses one",
            file=sys.stderr,
        )
        dataset.lane.close()
        dataset.lane = None
        return asyncio.run(runner.execute())
    progress = Progress(total, enabled=runner.opts.progress, peers=lambda: _peer_counts(shared, n))
    try:
        try:
            outcome = asyncio.run(runner.run_records(progress))
        except BaseException:  # this process failed: stop the workers, keep their lines, report it
            _signal(workers, signal.SIGTERM)
            _wait(workers, n, progress)
            parts.append(runner, workers)
            raise
        interrupted = outcome.interrupted
        if interrupted is not None:
            _signal(workers, interrupted)
        failed, stopped_by = _wait(workers, n, progress)
        parts.append(runner, workers)
    finally:
        progress.close()
        shared.close()
        dataset.lane.close()
        dataset.lane = None
    why = None
    if failed:  # the verdict's reason: partial, never a pass
        why = "; ".join(failed) + (
            ": its samples left were not run"
            if len(failed) == 1
            else ": their samples left were not run"
        )
    workers_block: Workers = {"processes": n}
    if failed:
        workers_block["failed"] = failed
    learned = replace(outcome.learned, workers=workers_block, partial_reason=why)
    for line in failed:
        print(
            f"ci-evals: {line}: its samples left were not run (finish with --resume {out})",
            file=sys.stderr,
        )
    return runner.finish(
        replace(
            outcome,
            interrupted=interrupted if interrupted is not None else stopped_by,
            learned=learned,
        ),
        partial=bool(failed),
    )


def _signal(workers: dict[int, tuple[int, Path]], signum: int) -> None:
    for pid in workers:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:  # already gone (and waited for below)
            pass


def _wait(
    workers: dict[int, tuple[int, Path]], n: int, progress: Progress
) -> tuple[list[str], int | None]:
    """Wait for every worker, showing their progress and passing on a signal this process gets:
    (how each failed worker ended, the signal that stopped a worker or this process meanwhile)."""
    pending = dict(workers)
    failed: list[str] = []
    stopped_by: int | None = None
    forwarded = False
    while pending:
        for pid in list(pending):
            got, status = os.waitpid(pid, os.WNOHANG)
            if got == 0:
                continue
            k, _ = pending.pop(pid)
            code = os.waitstatus_to_exitcode(status)
            if code in INTERRUPTED:  # stopped by a signal, as a run stops: lines kept
                stopped_by = stopped_by or code - 128
            elif code:
                how = (
                    f"was killed by {signal.Signals(-code).name}"
                    if code < 0
                    else f"exited with code {code}"
                )
                failed.append(f"worker process {k} of {n} {how}")
        held = held_now()
        if held is not None and not forwarded:
            forwarded = True
            stopped_by = stopped_by or held
            _signal(pending, held)
        progress.refresh()
        if pending:
            time.sleep(_POLL_S)
    return failed, stopped_by
