"""The run's progress: a bar on a terminal (rich), a plain line every ~10 % otherwise, nothing with
``--quiet``; errored samples and LLM throttling are counted as they happen."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Protocol

from ci_evals.results.records import ResultRecord

Note = Callable[[], str | None]
"""A line on throttling to show beside the count, when there is one."""


def errored(rec: ResultRecord) -> bool:
    """Whether a result record has an error (the sample's or a grade's): the progress line's count."""
    return bool(rec.get("error")) or any(g.get("error") for g in rec["grades"].values())


class Tracker(Protocol):
    """What a run tells of its progress: each record once written, then :meth:`close`."""

    note: Note

    def advance(self, rec: ResultRecord) -> None: ...

    def close(self) -> None: ...


class Progress:
    """A progress bar on a TTY (rich), plain lines every ~10 % otherwise, nothing when disabled."""

    def __init__(
        self, total: int, *, enabled: bool, peers: Callable[[], tuple[int, int]] | None = None
    ) -> None:
        self.total = total
        self.done = 0
        self.errors = 0
        self.peers = peers or (lambda: (0, 0))
        """(samples done, with errors) in the run's worker processes: counted in, not in :attr:`done`."""
        self.enabled = enabled and total > 0
        self.tty = self.enabled and sys.stderr.isatty()
        self.next_mark = max(1, total // 10)
        self._bar = None
        self._last = time.monotonic()
        self._shown = 0  # the count the last plain line showed
        self.note: Note = lambda: None
        if self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("evaluating", total=total)

    def advance(self, rec: ResultRecord) -> None:
        if not self.enabled:
            return
        self.done += 1
        self.errors += errored(rec)
        self.refresh()

    def refresh(self) -> None:
        """Show the count so far (the worker processes' too)."""
        if not self.enabled:
            return
        more, more_errors = self.peers()
        done, errors = self.done + more, self.errors + more_errors
        if self._bar is not None:
            note = self.note()
            self._bar.update(
                self._task,
                completed=done,
                description=f"evaluating ({errors} errors" + (f"; {note})" if note else ")"),
            )
        elif (done == self.total and self._shown < done) or (
            done >= self.next_mark and time.monotonic() - self._last >= 2.0
        ):
            self._shown = done
            note = self.note()
            print(
                f"progress: {done}/{self.total} samples ({errors} with errors"
                + (f"; {note})" if note else ")"),
                file=sys.stderr,
            )
            self.next_mark = done + max(1, self.total // 10)
            self._last = time.monotonic()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
