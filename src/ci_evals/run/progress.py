"""The run's progress: a bar on a terminal (rich), a plain line every ~10 % otherwise, nothing with
``--quiet``; errored samples and LLM throttling are counted as they happen."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    """A progress bar on a TTY (rich), plain lines every ~10 % otherwise, nothing when disabled."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total = total
        self.done = 0
        self.errors = 0
        self.enabled = enabled and total > 0
        self.tty = self.enabled and sys.stderr.isatty()
        self.next_mark = max(1, total // 10)
        self._bar = None
        self._last = time.monotonic()
        self.note: Any = lambda: None  # a line on throttling, when there is one
        if self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress("[progress.description]{task.description}", BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("evaluating", total=total)

    def advance(self, rec: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.done += 1
        if rec.get("error") or any(g.get("error") for g in rec["grades"].values()):
            self.errors += 1
        if self._bar is not None:
            note = self.note()
            self._bar.update(self._task, advance=1, description=f"evaluating ({self.errors} errors"
                             + (f"; {note})" if note else ")"))
        elif self.done == self.total or (self.done >= self.next_mark and time.monotonic() - self._last >= 2.0):
            note = self.note()
            print(f"progress: {self.done}/{self.total} samples ({self.errors} with errors"
                  + (f"; {note})" if note else ")"), file=sys.stderr)
            self.next_mark = self.done + max(1, self.total // 10)
            self._last = time.monotonic()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
