"""More processes for CPU-bound work: whether this process may fork, how many the user allows,
and :class:`Beside` (one piece of work done in a forked process while this one goes on).

Only on Linux, and only while this process has a single thread: ``fork()`` copies the calling
thread alone, so a lock another thread held would stay locked in the child forever.
``CI_EVALS_WORKERS=1`` keeps everything in one process; ``CI_EVALS_WORKERS=N`` asks for N
worker processes for a CPU-bound run, however small (ci_evals.run.lanes).

:func:`supervised` runs a command that runs user code in a child and refuses a green exit
without a verdict: ``os._exit(0)`` from a grader's thread or at import ends the child, never the
job, with exit 0 (see its docstring).
"""

from __future__ import annotations

import contextlib
import os
import pickle  # noqa: S403 - only this process's own forked child writes the pipe
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from ci_evals._util.errors import ConfigError

ENV = "CI_EVALS_WORKERS"


def requested() -> int | None:
    """The number of processes ``CI_EVALS_WORKERS`` asks for, or None (it is not set)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    # isdecimal, not isdigit: int() refuses "²"; four digits at most: int() refuses 4,300 or more
    if not text.isdecimal() or len(text) > 4 or int(text) < 1:
        raise ConfigError(
            f"{ENV} must be a whole number of processes from 1 to 9999; got {text[:40]!r}"
        )
    return int(text)


def can_fork() -> bool:
    return (
        sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1
    )


def usable_cores() -> int:
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )


def allowed() -> bool:
    """Whether work may go to another process now: it can fork, has a second core, and the user
    did not ask for one process."""
    return requested() != 1 and can_fork() and usable_cores() >= 2


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def fork() -> int:
    """``os.fork()`` for a worker of this process: the child is killed (SIGKILL) when this
    process dies, so no worker outlives a first process that was killed outright (Linux's
    ``PR_SET_PDEATHSIG``; a child whose parent died before it asked exits at once)."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _die_with(parent)
    return pid


def _die_with(parent: int) -> None:
    try:
        import ctypes  # in the child only: the first process never pays for it

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the child finishes its work, as before
        return
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)


class Beside:
    """``work()`` done in a forked process while this one goes on (when :func:`allowed`); :meth:`join`
    waits for it and returns what ``work()`` returned (pickled back through a pipe). When the fork
    is not allowed, or the child did not finish its work (an error, a signal, a value that does not
    pickle), :meth:`join` does the work here instead, where an error is reported as usual.
    :meth:`cancel` stops the child when its result is no longer wanted."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work
        self.pid: int | None = None
        self._read = -1
        if not allowed():
            return
        sys.stdout.flush()  # what is buffered now must not be written twice
        sys.stderr.flush()
        read, write = os.pipe()
        try:
            pid = fork()
        except OSError:  # EAGAIN, ENOMEM: the work is done here, in join()
            os.close(read)
            os.close(write)
            return
        if pid == 0:
            code = 1
            try:
                os.close(read)
                data = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(write, "wb") as fh:
                    fh.write(data)
                code = 0
            except BaseException:  # noqa: S110 - join() does the work again here and reports the error
                pass
            finally:
                os._exit(code)  # none of this process's cleanup (its locks, its buffers) runs twice
        os.close(write)
        self.pid, self._read = pid, read

    def join(self) -> Any:
        if self.pid is not None:
            fd, self._read = self._read, -1  # the file object owns it now
            with os.fdopen(fd, "rb") as fh:
                data = fh.read()
            _, status = os.waitpid(self.pid, 0)
            self.pid = None
            if os.waitstatus_to_exitcode(status) == 0:
                try:
                    return pickle.loads(data)
                except Exception:  # noqa: S110 - a torn or odd payload: the work is done here
                    pass
        return self.work()

    def cancel(self) -> None:
        """Stop the child, if one is working (its result is not wanted: this process is failing)."""
        if self.pid is not None:
            pid, self.pid = self.pid, None
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            if self._read >= 0:
                os.close(self._read)
                self._read = -1
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
NO_VERDICT = (
    "error: ci-evals ended with exit 0 before it reached a verdict (code of the suite ended the "
    "process, with os._exit or the like); not a pass"
)
_verdict_fd = -1


def supervised(work: Callable[[], int], refused: Callable[[int], None] = lambda code: None) -> int:
    """``work()``'s exit code, with ``work`` run in a forked child (Linux, one thread), this process
    waiting as its guard: it forwards SIGINT, SIGTERM and SIGHUP to the child, takes the exit code
    the child reports through a private pipe once ``work()`` returned, and turns an exit 0 without
    that report (user code called ``os._exit(0)``) into exit 3 with one line; ``refused(code)`` is
    called whenever the child ended without a report (exit 0 made 3, a kill 128 + n).
    The guard is a subreaper: what the run's processes started and left behind (a grader that
    forked, a daemon) is its child once they end, and is killed when the child has exited, so no
    copy holds the job's output open. Where it cannot fork, ``work()`` runs here."""
    if not (
        sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1
    ):
        return work()
    global _verdict_fd
    import ctypes  # the guard's prctl calls: a run imports it anyway

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(
        PR_SET_DUMPABLE, 0, 0, 0, 0
    )  # its environ (the run's keys) stays unreadable to user code
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    signals = [
        s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None
    ]
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        pid = fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
        os.close(read)
        os.close(write)
        return work()
    if pid == 0:
        os.close(read)
        _verdict_fd = write
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
        return report(work())
    os.close(write)
    for sig in signals:
        signal.signal(sig, lambda signum, frame: _forward(pid, signum))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
    # the guard's last step, loaded while the child works (not in the child, not after it: the user waits then)
    from ci_evals._util.procs import kill_descendants

    _, status = os.waitpid(pid, 0)
    for sig in signals:  # the run is over: a late signal must not cut the guard's exit short
        signal.signal(sig, signal.SIG_IGN)
    code = _reported(read, pid)
    kill_descendants()
    if code is not None:
        return code
    code = os.waitstatus_to_exitcode(status)
    code = 3 if code == 0 else 128 - code if code < 0 else code
    if code == 3:
        print(NO_VERDICT, file=sys.stderr)
    refused(code)  # the child ended before its verdict (os._exit, a kill): the caller's last word
    return code


def report(code: int) -> int:
    """Tell the guard (when this is its child) the exit code ``work()`` returned; return it."""
    global _verdict_fd
    if _verdict_fd >= 0:
        fd, _verdict_fd = _verdict_fd, -1
        with contextlib.suppress(OSError):
            os.write(fd, f"{os.getpid()} {code}\n".encode())
            os.close(fd)
    return code


def _forward(pid: int, signum: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signum)


def _reported(fd: int, pid: int) -> int | None:
    """The exit code child ``pid`` reported in the pipe (a forked copy's line does not count)."""
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 4096):
            data += chunk
            if len(data) > 65536:
                break
    os.close(fd)
    for line in data.decode("ascii", "replace").splitlines():
        sender, _, code = line.partition(" ")
        if sender == str(pid) and code.lstrip("-").isdigit():
            return int(code)
    return None
