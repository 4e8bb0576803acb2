"""Custom graders and extractors (the suite author's Python) off the event loop, time-limited.

Sync user functions run one at a time, in order, on a daemon thread (the same one-at-a-time
semantics as running them on the loop, which stays free to handle signals and other samples).
A call running longer than :data:`USER_CODE_SECONDS` is abandoned: its sample gets an error, a
fresh thread serves the calls after it, and the stuck one can never delay the exit. Code that
holds the GIL inside C (a catastrophic ``re`` search, say) still stalls the whole process: only a
separate process bounds that (``kind: python`` graders run in one). User coroutines run on an
event loop of their own under the same limit (ci_evals.usercode.aio).

``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit`` and any other ``BaseException`` raised by
the suite author's code are that code's error (:class:`UserCodeExit`, an ordinary ``Exception``),
wherever it runs: on this thread, on the user loop, on the run's loop (via :func:`contained`) or at
import. During a run no real Ctrl-C arrives as ``KeyboardInterrupt`` (ci_evals.run.signals handles
SIGINT), so one seen here was raised by the code itself; letting it through would end the run green
without a summary (``SystemExit(0)``).
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
from collections.abc import Callable
from typing import Any

from ci_evals.usercode.aio import on_user_loop
from ci_evals.usercode.contain import (
    ESCAPES,
    Abandoned,
    UserCodeExit,
    UserCodeTimeout,
    contained,
    describe,
    escaped,
    ours,
    raise_in,
    refill_stdio,
    settle,
)

__all__ = [
    "ESCAPES",
    "USER_CODE_SECONDS",
    "UserCodeExit",
    "UserCodeTimeout",
    "call",
    "contained",
    "describe",
    "escaped",
    "ours",
    "run",
]

USER_CODE_SECONDS = 300.0
"""Seconds one call of a custom grader or extractor may take."""

_Job = tuple[
    Callable[..., Any],
    tuple[Any, ...],
    asyncio.AbstractEventLoop,
    asyncio.Future[Any],
    str,
    float | None,
]
"""One queued call: (function, arguments, the caller's loop, its future, what it is, time limit)."""


class _Lane:
    """One daemon thread serving calls from a queue until it is abandoned."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.abandoned = False
        self.ident: int | None = None
        threading.Thread(target=self._guarded, name="ci-evals-user-code", daemon=True).start()

    def _guarded(self) -> None:
        self.ident = threading.get_ident()
        try:
            self._serve()
        except Abandoned:  # arrived between two calls: the thread was leaving anyway
            pass

    def stop(self) -> None:
        """Raise :class:`Abandoned` in the thread, at its next Python instruction."""
        if self.ident is not None:
            raise_in(self.ident)

    def _serve(self) -> None:
        while not self.abandoned:
            fn, args, loop, fut, what, seconds = self.queue.get()
            if fut.done():  # cancelled while it waited (the run was interrupted): never started
                continue
            try:
                loop.call_soon_threadsafe(_arm, fut, what, seconds, self)
            except RuntimeError:  # the event loop is gone: nobody waits for this call
                continue
            try:
                value, error = fn(*args), None
            except Exception as exc:
                value, error = None, exc
            except Abandoned:
                return
            except (
                BaseException
            ) as exc:  # SystemExit, CancelledError, any other: an ordinary failure
                value, error = None, escaped(exc)
            finally:
                refill_stdio()
            try:
                loop.call_soon_threadsafe(settle, fut, value, error)
            except RuntimeError:
                pass


_lane: _Lane | None = None


def _current() -> _Lane:
    global _lane
    if _lane is None or _lane.abandoned:
        _lane = _Lane()
    return _lane


def _arm(fut: asyncio.Future[Any], what: str, seconds: float | None, lane: _Lane) -> None:
    """The call has started: time it, and leave its thread behind if nobody waits for it any more."""
    if fut.done():
        return
    handle = (
        None
        if seconds is None
        else asyncio.get_running_loop().call_later(seconds, _expire, fut, what, seconds, lane)
    )

    def done(_: asyncio.Future[Any]) -> None:
        if handle is not None:
            handle.cancel()
        if (
            fut.cancelled()
        ):  # the run was interrupted mid-call: later calls must not queue behind it
            _abandon(lane)

    fut.add_done_callback(done)


def _expire(fut: asyncio.Future[Any], what: str, seconds: float, lane: _Lane) -> None:
    if fut.done():
        return
    fut.set_exception(UserCodeTimeout(f"{what} took over {seconds:g} s and was abandoned"))
    _abandon(lane)


def _abandon(lane: _Lane) -> None:
    if lane.abandoned:
        return
    lane.abandoned = True
    lane.stop()
    fresh = _current()  # the calls queued behind the stuck one move to a fresh thread
    while True:
        try:
            fresh.queue.put(lane.queue.get_nowait())
        except queue.Empty:
            break


async def call(fn: Callable[..., Any], *args: Any, what: str, limited: bool = True) -> Any:
    """``fn(*args)`` on the user-code thread; UserCodeTimeout past USER_CODE_SECONDS of running
    (``limited=False``: no limit; a signal still ends the wait, the loop being free)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    _current().queue.put((fn, args, loop, fut, what, USER_CODE_SECONDS if limited else None))
    return await fut


async def run(
    fn: Callable[..., Any], *args: Any, what: str, limited: bool = True, here: bool = False
) -> Any:
    """Call user code of either colour: a coroutine function on the user-code event loop, anything
    else on the user-code thread (an awaitable it returns is awaited on that loop); every escape is
    a :class:`UserCodeExit`. ``here``: a coroutine runs on the caller's loop (it was handed an
    object bound to that loop, such as the target's client), contained but not off the loop."""
    if inspect.iscoroutinefunction(fn):
        if here:
            with contained():
                return await fn(*args)
        return await on_user_loop(lambda: fn(*args), what, USER_CODE_SECONDS if limited else None)
    out = await call(fn, *args, what=what, limited=limited)
    if not inspect.isawaitable(out):
        return out
    if here:
        with contained():
            return await out
    return await on_user_loop(lambda: out, what, USER_CODE_SECONDS if limited else None)
