"""More processes for CPU-bound work: whether this process may fork, how many the user allows,
and :class:`Beside` (one piece of work done in a forked process while this one goes on).

Only on Linux, and only while this process has a single thread: ``fork()`` copies the calling
thread alone, so a lock another thread held would stay locked in the child forever.
``CI_EVALS_WORKERS=1`` keeps everything in one process; ``CI_EVALS_WORKERS=N`` asks for N
worker processes for a CPU-bound run, however small (ci_evals.run.lanes).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

from ci_evals._util.errors import ConfigError

ENV = "CI_EVALS_WORKERS"


def requested() -> int | None:
    """The number of processes ``CI_EVALS_WORKERS`` asks for, or None (it is not set)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    # isdecimal, not isdigit: int() refuses "²"; four digits at most: int() refuses 4,300 or more
    if not text.isdecimal() or len(text) > 4 or int(text) < 1:
        raise ConfigError(f"{ENV} must be a whole number of processes from 1 to 9999; got {text[:40]!r}")
    return int(text)


def can_fork() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def allowed() -> bool:
    """Whether work may go to another process now: it can fork, has a second core, and the user
    did not ask for one process."""
    return requested() != 1 and can_fork() and usable_cores() >= 2


class Beside:
    """``work()`` done in a forked process while this one goes on (when :func:`allowed`); :meth:`join`
    waits for it. When the fork is not allowed, or the child did not finish its work (an error, a
    signal), :meth:`join` does the work here instead, where an error is reported as usual."""

    def __init__(self, work: Callable[[], None]) -> None:
        self.work = work
        self.pid: int | None = None
        if not allowed():
            return
        sys.stdout.flush()  # what is buffered now must not be written twice
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                work()
                code = 0
            except BaseException:  # noqa: S110 - join() does the work again here and reports the error
                pass
            finally:
                os._exit(code)  # none of this process's cleanup (its locks, its buffers) runs twice
        self.pid = pid

    def join(self) -> None:
        if self.pid is not None:
            _, status = os.waitpid(self.pid, 0)
            self.pid, done = None, os.waitstatus_to_exitcode(status) == 0
            if done:
                return
        self.work()
