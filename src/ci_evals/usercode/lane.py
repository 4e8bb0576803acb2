"""Custom graders and extractors (the suite author's Python) off the event loop, time-limited.

Sync user functions run one at a time, in order, on a daemon thread (the same one-at-a-time
semantics as running them on the loop, which stays free to handle signals and other samples).
A call running longer than :data:`USER_CODE_SECONDS` is abandoned: its sample gets an error, a
fresh thread serves the calls after it, and the stuck one can never delay the exit. Code that
holds the GIL inside C (a catastrophic ``re`` search, say) still stalls the whole process: only a
separate process bounds that (``kind: python`` graders run in one).

``SystemExit``, ``KeyboardInterrupt`` and ``GeneratorExit`` raised by the suite author's code are
that code's error (:class:`UserCodeExit`, an ordinary ``Exception``), wherever it runs: on this
thread, on the loop (async code, via :func:`contained`) or at import. During a run no real Ctrl-C
arrives as ``KeyboardInterrupt`` (ci_evals.run.signals handles SIGINT), so one seen here was raised by
the code itself; letting it through would end the run green without a summary (``SystemExit(0)``).
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

USER_CODE_SECONDS = 300.0
"""Seconds one call of a custom grader or extractor may take."""


ESCAPES = (SystemExit, KeyboardInterrupt, GeneratorExit)
"""What user code may raise that is not an ``Exception`` but must never end the run."""


class UserCodeTimeout(Exception):
    """A custom function ran past its time limit and was abandoned."""


class UserCodeExit(Exception):
    """User code raised SystemExit, KeyboardInterrupt or GeneratorExit: its error, not a way out."""


def escaped(exc: BaseException) -> UserCodeExit:
    """``SystemExit(0)`` as an error whose text names it: ``SystemExit(0)``."""
    args = ", ".join(repr(a) for a in exc.args)
    return UserCodeExit(f"{type(exc).__name__}({args})")


def describe(exc: BaseException) -> str:
    """How a failure of user code reads in an error: ``ValueError: bad``, ``SystemExit(0)``."""
    return str(exc) if isinstance(exc, UserCodeExit) else f"{type(exc).__name__}: {exc}"


@contextmanager
def contained() -> Iterator[None]:
    """Turn an escape (SystemExit and the like) raised inside the block into :class:`UserCodeExit`."""
    try:
        yield
    except ESCAPES as exc:
        raise escaped(exc) from None


class _Abandoned(BaseException):
    """Raised inside an abandoned call's thread so Python code spinning there stops burning the CPU
    (and the GIL) that the run's exit needs. Code blocked in C (``time.sleep``) is not reached."""


class _Lane:
    """One daemon thread serving calls from a queue until it is abandoned."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.abandoned = False
        self.ident: int | None = None
        threading.Thread(target=self._guarded, name="ci-evals-user-code", daemon=True).start()

    def _guarded(self) -> None:
        self.ident = threading.get_ident()
        try:
            self._serve()
        except _Abandoned:  # arrived between two calls: the thread was leaving anyway
            pass

    def stop(self) -> None:
        """Raise :class:`_Abandoned` in the thread, at its next Python instruction."""
        if self.ident is not None:
            import ctypes

            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.ident), ctypes.py_object(_Abandoned))

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
            except ESCAPES as exc:  # SystemExit and the like from user code: an ordinary failure
                value, error = None, escaped(exc)
            except _Abandoned:
                return
            except BaseException as exc:  # anything stranger still: never the end of the thread
                value, error = None, UserCodeExit(type(exc).__name__)
            try:
                loop.call_soon_threadsafe(_settle, fut, value, error)
            except RuntimeError:
                pass


_lane: _Lane | None = None


def _current() -> _Lane:
    global _lane
    if _lane is None or _lane.abandoned:
        _lane = _Lane()
    return _lane


def _arm(fut: asyncio.Future, what: str, seconds: float | None, lane: _Lane) -> None:
    """The call has started: time it, and leave its thread behind if nobody waits for it any more."""
    if fut.done():
        return
    handle = None if seconds is None else \
        asyncio.get_running_loop().call_later(seconds, _expire, fut, what, seconds, lane)

    def done(_: asyncio.Future) -> None:
        if handle is not None:
            handle.cancel()
        if fut.cancelled():  # the run was interrupted mid-call: later calls must not queue behind it
            _abandon(lane)

    fut.add_done_callback(done)


def _expire(fut: asyncio.Future, what: str, seconds: float, lane: _Lane) -> None:
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


def _settle(fut: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


async def call(fn: Callable[..., Any], *args: Any, what: str, limited: bool = True) -> Any:
    """``fn(*args)`` on the user-code thread; UserCodeTimeout past USER_CODE_SECONDS of running
    (``limited=False``: no limit; a signal still ends the wait, the loop being free)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    _current().queue.put((fn, args, loop, fut, what, USER_CODE_SECONDS if limited else None))
    return await fut


async def run(fn: Callable[..., Any], *args: Any, what: str, limited: bool = True) -> Any:
    """Call user code of either colour: a coroutine function on the loop, anything else on the
    user-code thread (an awaitable it returns is awaited); every escape is a :class:`UserCodeExit`."""
    with contained():
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        out = await call(fn, *args, what=what, limited=limited)
        return await out if inspect.isawaitable(out) else out
