"""SIGINT/SIGTERM/SIGHUP handling that never leaves a window where a signal kills the flush.

Every signal that ends a process by default and that a CI runner or a terminal sends (SIGINT from
Ctrl-C, SIGTERM from a cancelled job, SIGHUP from a closed terminal or SSH session) is handled the
same way: the run stops, its summary says ``interrupted`` by that signal, every process tree it
started is killed, and the exit code is 128 + the signal's number.

:func:`on_signals` installs plain Python handlers and restores the previous ones on exit, so
nested uses hand over without a gap: ``run`` holds signals (records, ignores) from the start of a
run until every results file is written, and the runner's own handler (cancel the run) sits
inside. asyncio's ``add_signal_handler`` cannot nest: removing it resets the default action,
which is how a second Ctrl-C during the flush used to lose the partial summary.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SIGNALS = tuple(
    s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None
)


@contextmanager
def on_signals(
    callback: Callable[[int], None], *, ignore_after: Callable[[], bool] = lambda: False
) -> Iterator[None]:
    """Call ``callback(signum)`` on each of :data:`SIGNALS` inside the block (main thread only; elsewhere a no-op).

    On exit the previous handlers come back, unless ``ignore_after()`` is true: then the signals
    stay ignored (the process is winding down because of one; more must not cut its exit short).
    """
    previous = {}
    try:
        for sig in SIGNALS:
            previous[sig] = signal.signal(sig, lambda signum, frame: callback(signum))
    except ValueError:  # not the main thread: signals are not ours to handle
        pass
    for held in _holding:  # a signal held just before this handler took over is not lost
        if held.received and not held.forwarded:
            held.forwarded = True
            callback(held.received[0])
    try:
        yield
    finally:
        ignore = ignore_after()
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if ignore else handler)


class Held:
    """What :func:`held_signals` saw; set ``stopping`` to keep ignoring signals after the block."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.stopping = False
        self.forwarded = False


_holding: list[Held] = []


class _ReapedNoise(logging.Filter):
    """asyncio's "Unknown child process pid N, will report returncode 255": a program whose tree
    the run killed (a signal, a timeout) was reaped when its pipes were closed, before asyncio's
    child watcher asked for it. Nothing is lost (the sample had ended); the line would only reach
    stderr in the middle of the interruption's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            isinstance(record.msg, str) and record.msg.startswith("Unknown child process pid")
        )


@contextmanager
def held_signals() -> Iterator[Held]:
    """Record each of :data:`SIGNALS` inside the block instead of acting on them (and keep
    asyncio's reaping noise, :class:`_ReapedNoise`, off stderr meanwhile)."""
    held = Held()
    noise, log = _ReapedNoise(), logging.getLogger("asyncio")
    log.addFilter(noise)
    with on_signals(
        held.received.append, ignore_after=lambda: held.stopping or bool(held.received)
    ):
        _holding.append(held)
        try:
            yield held
        finally:
            _holding.remove(held)
            log.removeFilter(noise)


def held_now() -> int | None:
    """The first signal a :func:`held_signals` block has recorded so far, or None."""
    for held in _holding:
        if held.received:
            return held.received[0]
    return None
