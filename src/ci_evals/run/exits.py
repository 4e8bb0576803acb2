"""Exit codes, and the one mapping of what escapes a command to one of them.

0 verdict passed; 1 verdict failed, errored or partial; 2 invalid configuration or input (one
line, no traceback); 3 internal error; 128 + n interrupted by signal n (129 SIGHUP, 130 SIGINT,
143 SIGTERM). Light on purpose: the CLI imports it before it knows which command runs.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable

from ci_evals._util.errors import ConfigError
from ci_evals._util.redact import ScrubbedStream, scrub

EXIT_PASS, EXIT_GATE, EXIT_CONFIG, EXIT_INTERNAL = 0, 1, 2, 3


def guarded(command: Callable[[], int]) -> int:
    """``command()``'s exit code; a ConfigError is one line and 2, anything else that escapes is 3."""
    try:
        return command()
    except ConfigError as exc:
        print(scrub(f"error: {exc}"), file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
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
        return EXIT_INTERNAL
    except Exception:  # a bug of ours: say so, with the traceback, and exit 3
        import traceback

        print(scrub(traceback.format_exc()), end="", file=sys.stderr)
        print(
            "internal error: this is a bug in ci-evals, please report it with the traceback above",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


class _Kept(io.TextIOWrapper):
    """stdout or stderr over a private copy of its descriptor, which closing only flushes."""

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.flush()


_kept: list = []


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
