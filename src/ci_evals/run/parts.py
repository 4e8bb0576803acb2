"""The workers' part files: where each worker process writes its records, and how they come back.

Worker ``k`` of a split run (:mod:`ci_evals.run.lanes`) writes its records to
``.results.worker-k.jsonl`` in the output folder and, once it finished, the aggregator state of
those records beside it (``.results.worker-k.state.json``). The first process appends each part's
complete lines to results.jsonl (a killed worker's torn last line is left out, and that job runs
again with ``--resume``) and merges its state into the one aggregator, or, when the worker did not
finish, adds its records line by line. Part files are never followed through a link, never waited
on (a FIFO), and a folder of either name is not ours: left alone, or refused when a worker needs
the name.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

from ci_evals._util import gcpolicy
from ci_evals._util.errors import ConfigError
from ci_evals.gating.aggregate import AggregatorState
from ci_evals.results.files import Trust, foreign_shape, iter_records, own_loads
from ci_evals.results.records import ResultRecord
from ci_evals.results.writer import open_append
from ci_evals.run.folderlock import ResumedJobs, job_key
from ci_evals.run.runner import Runner

PREFIX = ".results.worker-"


def part_file(out: Path, k: int) -> Path:
    """Where worker ``k`` (1, 2...) of a split run writes its records in the output folder ``out``."""
    return out / f"{PREFIX}{k}.jsonl"


def state_file(part: Path) -> Path:
    return part.with_suffix(".state.json")


def settle(runner: Runner, jobs: ResumedJobs | None) -> None:
    """The part files of a run killed outright (its workers died with it, before their lines were
    appended). ``--resume`` checks every line of them (as another run's: ConfigError naming the
    file and line, nothing appended), appends their complete lines to results.jsonl and takes their
    records as done, so no sample is run or counted twice; a new run removes them, so that a later
    ``--resume`` never takes another run's lines for its own. The folder's lock is held here."""
    out = runner.opts.output
    found = sorted(out.glob(f"{PREFIX}*.jsonl")) if out.is_dir() else []
    parts = [
        p for p in found if p.is_symlink() or not p.is_dir()
    ]  # a folder of that name is not ours
    readable = [
        p for p in parts if p.is_file() and not p.is_symlink()
    ]  # a planted link is removed, never read
    if readable and jobs is not None:
        for part in readable:  # all of them checked before one line is appended
            for n, rec in iter_records(part, Trust.OTHER, what=part.name):
                jobs.check(job_key(rec), part, n + 1)
        with open_append(out / runner.opts.results_name, truncate=False) as fh:
            fh.flush()
            for part in readable:
                whole = _copy_lines(part, fh.buffer)
                for n, rec in iter_records(part, Trust.OTHER, what=part.name):
                    if (
                        n < whole and job_key(rec) not in runner.done_keys
                    ):  # (a torn last line was not copied)
                        runner.done_keys.add(job_key(rec))
                        with foreign_shape(f"{part}:{n + 1}", "this record"):
                            runner.agg.add(rec)
    for part in parts:
        discard(part)


def discard(part: Path) -> None:
    """A worker's part file and its state file, removed once read (or never to be read); a folder
    of either name is not ours: left alone (a split run refuses it, see :func:`free`)."""
    for path in (part, state_file(part)):
        if not path.is_dir() or path.is_symlink():
            path.unlink(missing_ok=True)


def free(part: Path) -> None:
    """The part file's and state file's names free for a worker (a state left by a run killed
    outright is not this run's); ConfigError when a folder holds either name."""
    for path in (part, state_file(part)):
        if path.is_dir() and not path.is_symlink():
            raise ConfigError(
                "is a folder where a worker process writes its records: remove it", file=str(path)
            )
        path.unlink(missing_ok=True)


def append(runner: Runner, workers: dict[int, tuple[int, Path]]) -> None:
    """Each worker's complete lines, worker by worker, appended to results.jsonl, and its records
    added to the aggregator: from the state it left when it finished, else line by line."""
    with (
        gcpolicy.streaming(),
        open_append(runner.opts.output / runner.opts.results_name, truncate=False) as fh,
    ):
        fh.flush()
        for _, part in sorted(workers.values()):
            state = read_state(state_file(part))
            lines = _copy_lines(part, fh.buffer)
            if state is not None and state.get("records") == lines:
                runner.agg.merge(state)
            else:  # the worker did not finish (killed): its lines are all there is
                for rec in _records(part):
                    runner.agg.add(rec)
            discard(part)


def _open(path: Path) -> BinaryIO | None:
    """``path`` to read, or None when it is absent or not a regular file (never a FIFO's wait)."""
    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except FileNotFoundError:  # the worker ended before it wrote it
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def read_state(path: Path) -> AggregatorState | None:
    """A worker's aggregator state, as that worker of this run wrote it (None when it did not)."""
    src = _open(path)
    if src is None:
        return None
    with src:
        state = own_loads(src.read())
    return cast(AggregatorState, state) if isinstance(state, dict) else None


def _copy_lines(part: Path, out: BinaryIO) -> int:
    """Copy ``part`` up to its last newline (a killed worker's torn last line is left out, and
    that job runs again with ``--resume``); the number of lines copied."""
    src = _open(part)
    if src is None:
        return 0
    lines, tail = 0, b""
    with src:
        while chunk := src.read(1 << 20):
            chunk = tail + chunk
            end = chunk.rfind(b"\n") + 1
            out.write(chunk[:end])
            lines += chunk.count(b"\n", 0, end)
            tail = chunk[end:]
    return lines


def _records(part: Path) -> Iterator[ResultRecord]:
    """The records of a worker's complete lines (ours: written by :meth:`Runner._write`)."""
    src = _open(part)
    if src is None:
        return
    with src:
        for raw in src:
            if not raw.endswith(b"\n"):
                return
            rec = own_loads(raw)
            if isinstance(rec, dict):
                yield cast(ResultRecord, rec)  # a line a worker of this run wrote
