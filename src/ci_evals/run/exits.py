"""Exit codes, and the one mapping of what escapes a command to one of them.

:class:`ExitCode` is every exit code ci-evals ends with (public: the README, docs/reference.md and
the Action's ``exit-code`` output name them, so a value never changes): 0 verdict passed; 1
verdict failed, errored or partial; 2 invalid configuration or input (one line, no traceback); 3
internal error; 128 + n interrupted by signal n (129 SIGHUP, 130 SIGINT, 143 SIGTERM, the signals
of :mod:`ci_evals.run.signals`); 141 the output was cut: whoever read stdout closed it first
(``ci-evals list | head -1``: what a shell reports for a program SIGPIPE stops). Light on purpose:
the CLI imports it before it knows which command runs.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable
from enum import IntEnum
from typing import TextIO

from ci_evals._util.errors import ConfigError
from ci_evals._util.redact import ScrubbedStream, scrub


class ExitCode(IntEnum):
    """The exit code of a command (an ``int``: what ``main`` returns and ``sys.exit`` takes)."""

    PASSED = 0
    FAILED = 1
    """The verdict is failed, errored or partial (or the results read are not a run's)."""
    CONFIG = 2
    INTERNAL = 3
    SIGHUP = 128 + 1
    SIGINT = 128 + 2
    SIGTERM = 128 + 15
    SIGPIPE = 128 + 13
    """Stdout's reader closed it before the output was written (not a signal we stop on: Python
    ignores SIGPIPE, and the write fails instead)."""

    @classmethod
    def of_verdict(cls, verdict: str, interrupted_by: str | None = None) -> ExitCode:
        """The code of a verdict word; ``interrupted`` by the signal named ``interrupted_by``
        (``SIGTERM``...), SIGINT's when it names none we know."""
        if verdict == "passed":
            return cls.PASSED
        if verdict == "interrupted":
            code = cls.__members__.get(interrupted_by or "SIGINT", cls.SIGINT)
            return code if code in INTERRUPTED else cls.SIGINT
        return cls.FAILED

    @classmethod
    def of_signal(cls, signum: int) -> ExitCode:
        """128 + ``signum``: the code of a run stopped by one of the signals it handles."""
        return cls(128 + signum)


INTERRUPTED = frozenset({ExitCode.SIGHUP, ExitCode.SIGINT, ExitCode.SIGTERM})
"""The codes of a run interrupted by a signal (its results kept, ``--resume`` finishes it)."""


def guarded(command: Callable[[], int]) -> int:
    """``command()``'s exit code; a ConfigError is one line and 2, a stdout whose reader has gone
    141 and nothing more (:func:`cut_off`), anything else that escapes is 3."""
    try:
        code = command()
        _flush_stdout()
        return code
    except ConfigError as exc:
        print(scrub(f"error: {exc}"), file=sys.stderr)
        return ExitCode.CONFIG
    except KeyboardInterrupt:
        return ExitCode.SIGINT
    except (
        SystemExit,
        GeneratorExit,
    ) as exc:  # past argparse, only code of the suite's raises these
        print(
            scrub(
                f"error: suite code raised {type(exc).__name__}({exc}) outside any sample; "
                "no summary was written"
            ),
            file=sys.stderr,
        )
        return ExitCode.INTERNAL
    except Exception as exc:  # a bug of ours: say so, with the traceback, and exit 3
        if isinstance(exc, BrokenPipeError) and cut_off():
            return ExitCode.SIGPIPE
        import traceback

        print(scrub(traceback.format_exc()), end="", file=sys.stderr)
        print(
            "internal error: this is a bug in ci-evals, please report it with the traceback above",
            file=sys.stderr,
        )
        return ExitCode.INTERNAL


def _flush_stdout() -> None:
    """Write what stdout still buffers now, so that a closed reader is met here (BrokenPipeError)
    rather than by the interpreter's last flush; any other failure is left to that flush, as before."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError):  # noqa: S110 - a full disk, a stream user code closed: as before
        pass


def cut_off() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone (``| head``), and if so, send
    what is left of the output nowhere: the interpreter's last flush then fails on nothing (it
    would print "Exception ignored ... BrokenPipeError" and exit 120). False for any other
    BrokenPipeError, which is then a bug like any other."""
    import select

    fds = {1}
    with contextlib.suppress(AttributeError, OSError, ValueError):
        fds.add(sys.stdout.fileno())  # our own copy of it (keep_stdio)
    gone = False
    for fd in fds:
        with contextlib.suppress(OSError, ValueError):
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            gone = gone or any(event & select.POLLERR for _, event in poller.poll(0))
    if gone:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in fds:
            with contextlib.suppress(OSError):
                os.dup2(devnull, fd)
        os.close(devnull)
    return gone


class _Kept(io.TextIOWrapper):
    """stdout or stderr over a private copy of its descriptor, which closing only flushes."""

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.flush()


_kept: list[TextIO] = []


def keep_stdio() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` (scrubbed) streams over private copies of descriptors 1
    and 2, once, before any user code runs: a grader that closes ``sys.stdout``, ``sys.stderr`` or
    the descriptors themselves (whose numbers the next file opened would take) silences neither the
    verdict nor an error; :func:`restore_stdio` puts them back if user code replaced them."""
    if _kept:
        return
    for name, fd in (("stdout", 1), ("stderr", 2)):
        current = getattr(sys, name)
        try:
            raw = io.FileIO(os.dup(fd), "w")  # not inherited by the programs a run starts
        except (OSError, ValueError):
            stream = current
        else:
            stream = _Kept(
                io.BufferedWriter(raw),
                encoding=getattr(current, "encoding", None) or "utf-8",
                errors=getattr(current, "errors", None) or "backslashreplace",
                line_buffering=bool(getattr(current, "line_buffering", name == "stderr")),
                write_through=bool(getattr(current, "write_through", False)),
            )
        if name == "stderr" and not isinstance(stream, ScrubbedStream):
            stream = ScrubbedStream(stream)
        setattr(sys, name, stream)
        _kept.append(stream)


def restore_stdio() -> None:
    """``sys.stdout`` and ``sys.stderr`` as :func:`keep_stdio` made them (when it did)."""
    if _kept:
        sys.stdout, sys.stderr = _kept
