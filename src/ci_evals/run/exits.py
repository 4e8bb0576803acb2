"""Exit codes, and the one mapping of what escapes a command to one of them.

:class:`ExitCode` is every exit code ci-evals ends with (public: the README, docs/reference.md and
the Action's ``exit-code`` output name them, so a value never changes): 0 verdict passed; 1
verdict failed, errored or partial; 2 invalid configuration or input (one line, no traceback); 3
internal error; 128 + n interrupted by signal n (129 SIGHUP, 130 SIGINT, 143 SIGTERM, the signals
of :mod:`ci_evals.run.signals`). Light on purpose: the CLI imports it before it knows which
command runs.
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
    """``command()``'s exit code; a ConfigError is one line and 2, anything else that escapes is 3."""
    try:
        return command()
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
    except Exception:  # a bug of ours: say so, with the traceback, and exit 3
        import traceback

        print(scrub(traceback.format_exc()), end="", file=sys.stderr)
        print(
            "internal error: this is a bug in ci-evals, please report it with the traceback above",
            file=sys.stderr,
        )
        return ExitCode.INTERNAL


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
