"""Custom graders and extractors (the suite author's Python) off the event loop, time-limited.

Sync user functions run one at a time, in order, on a daemon thread (the same one-at-a-time
semantics as running them on the loop, which stays free to handle signals and other samples).
A call running longer than :data:`USER_CODE_SECONDS` is abandoned: its sample gets an error, a
fresh thread serves the calls after it, and the stuck one can never delay the exit. Code that
holds the GIL inside C (a catastrophic ``re`` search, say) still stalls the whole process: only a
separate process bounds that (``kind: python`` graders run in one).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

USER_CODE_SECONDS = 300.0
"""Seconds one call of a custom grader or extractor may take."""


class UserCodeTimeout(Exception):
    """A custom function ran past its time limit and was abandoned."""


class _Lane:
    """One daemon thread serving calls from a queue until it is abandoned."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.abandoned = False
        threading.Thread(target=self._serve, name="ci-evals-user-code", daemon=True).start()

    def _serve(self) -> None:
        while not self.abandoned:
            fn, args, loop, fut, what = self.queue.get()
            try:
                loop.call_soon_threadsafe(_arm, fut, what, self)
            except RuntimeError:  # the event loop is gone: nobody waits for this call
                continue
            try:
                value, error = fn(*args), None
            except Exception as exc:
                value, error = None, exc
            except BaseException as exc:  # SystemExit and the like from user code: an ordinary failure
                value, error = None, RuntimeError(f"raised {type(exc).__name__}")
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


def _arm(fut: asyncio.Future, what: str, lane: _Lane) -> None:
    if fut.done():
        return
    handle = asyncio.get_running_loop().call_later(USER_CODE_SECONDS, _expire, fut, what, lane)
    fut.add_done_callback(lambda _: handle.cancel())


def _expire(fut: asyncio.Future, what: str, lane: _Lane) -> None:
    if fut.done():
        return
    fut.set_exception(UserCodeTimeout(f"{what} took over {USER_CODE_SECONDS:g} s and was abandoned"))
    lane.abandoned = True
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


async def call(fn: Callable[..., Any], *args: Any, what: str) -> Any:
    """``fn(*args)`` on the user-code thread; UserCodeTimeout past USER_CODE_SECONDS of running."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    _current().queue.put((fn, args, loop, fut, what))
    return await fut
