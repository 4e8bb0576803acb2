"""User coroutines (async graders, reward composers, setup scripts given no client) on an event
loop of their own, in a daemon thread of its own, time-limited.

The run's loop stays free for signals whatever a coroutine does (``time.sleep`` included), and
whatever one raises comes back as that call's error (ci_evals.usercode.contain): an
``asyncio.CancelledError`` is the run's own only when the caller stopped waiting. Coroutines run
concurrently on that loop, as they did on the run's. A coroutine cancelled at its time limit that
has not ended :data:`GRACE_SECONDS` later (its loop is blocked, or it ignores the cancellation)
has its loop abandoned: calls not yet started move to a fresh loop, the others fail with a
timeout, and Python code spinning in that thread is stopped. The time limit counts from the
call's start on the user loop, as it does for sync code.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from ci_evals.usercode.contain import (
    Abandoned,
    UserCodeTimeout,
    escaped,
    raise_in,
    refill_stdio,
    settle,
)

GRACE_SECONDS = 2.0
"""How long a coroutine cancelled at its time limit has to end before its loop counts as blocked."""

_QUEUED, _STARTED, _ENDED = 0, 1, 2
_state_lock = threading.Lock()


class _Call:
    """One user coroutine: made and run on a user loop, settled on the caller's loop."""

    __slots__ = ("ask", "fut", "loop", "make", "owner", "state", "task", "what")

    def __init__(self, make: Callable[[], Any], loop: asyncio.AbstractEventLoop, what: str) -> None:
        self.make, self.loop, self.what = make, loop, what
        self.fut: asyncio.Future[Any] = loop.create_future()
        self.owner: _UserLoop | None = None
        self.state = _QUEUED
        self.task: asyncio.Task[None] | None = None
        self.ask = False  # the caller stopped waiting: a CancelledError is then ours


class _UserLoop:
    """An event loop in a daemon thread, running user coroutines concurrently."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.calls: set[_Call] = set()  # queued or started, not ended (changed under _state_lock)
        self.abandoned = False
        self.ident: int | None = None
        threading.Thread(target=self._serve, name="ci-evals-user-async", daemon=True).start()

    def _serve(self) -> None:
        self.ident = threading.get_ident()
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        except BaseException:  # noqa: S110 - user code raised out of a callback, or the loop was abandoned
            pass
        finally:
            _retire(self, "its event loop stopped")

    def start(self, call: _Call) -> None:
        with _state_lock:
            if call.owner is not self or call.state != _QUEUED:
                return
            call.state = _STARTED
        call.task = self.loop.create_task(self._guard(call))

    async def _guard(self, call: _Call) -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = await call.make()
        except Abandoned:
            raise
        except asyncio.CancelledError as exc:
            if call.ask:
                return
            error = escaped(exc)
        except Exception as exc:
            error = exc
        except (
            BaseException
        ) as exc:  # SystemExit, GeneratorExit, a class of the author's: its error
            error = escaped(exc)
        finally:
            refill_stdio()
            with _state_lock:
                call.state = _ENDED
                self.calls.discard(call)
        try:
            call.loop.call_soon_threadsafe(settle, call.fut, value, error)
        except RuntimeError:  # the caller's loop is gone: nobody waits for this call
            pass


_user_loop: _UserLoop | None = None
_retired: list[
    _UserLoop
] = []  # abandoned loops stay referenced: a pending task collected would log


def _submit(call: _Call) -> None:
    global _user_loop
    while True:
        with _state_lock:
            if _user_loop is None or _user_loop.abandoned:
                _user_loop = _UserLoop()
            lane = _user_loop
            call.owner = lane
            lane.calls.add(call)
        try:
            lane.loop.call_soon_threadsafe(lane.start, call)
            return
        except RuntimeError:  # closed under us: a fresh loop takes it
            _retire(lane, "its event loop stopped")


def _retire(lane: _UserLoop, why: str) -> None:
    """Take no more calls on ``lane``: queued ones move to a fresh loop, started ones fail."""
    with _state_lock:
        if lane.abandoned and not lane.calls:
            return
        lane.abandoned = True
        calls, lane.calls = list(lane.calls), set()
        _retired.append(lane)
    for c in calls:
        if c.state == _QUEUED:
            _submit(c)
        elif c.state == _STARTED:
            c.state = _ENDED
            err = UserCodeTimeout(f"{c.what} was abandoned: {why}")
            try:
                c.loop.call_soon_threadsafe(settle, c.fut, None, err)
            except RuntimeError:
                pass


def _stop(call: _Call) -> None:
    """The caller no longer waits for ``call``: it never starts, or its task is cancelled."""
    call.ask = True
    with _state_lock:
        if call.state == _QUEUED:
            call.state = _ENDED
            if call.owner is not None:
                call.owner.calls.discard(call)
            return
    lane = call.owner
    if call.state == _STARTED and lane is not None:
        try:
            lane.loop.call_soon_threadsafe(_cancel_task, call)
        except RuntimeError:
            pass


def _cancel_task(call: _Call) -> None:
    if call.task is not None:
        call.task.cancel()


def _expire(call: _Call, seconds: float) -> None:
    if call.fut.done():
        return
    if call.state == _QUEUED:  # its loop has not started it yet: the limit counts from its start
        call.loop.call_later(seconds, _expire, call, seconds)
        return
    call.fut.set_exception(
        UserCodeTimeout(f"{call.what} took over {seconds:g} s and was abandoned")
    )
    _stop(call)
    call.loop.call_later(GRACE_SECONDS, _blocked, call)


def _blocked(call: _Call) -> None:
    """A coroutine still running after its cancellation: its loop is blocked (or it ignores
    cancellation). Abandon that loop, and stop Python code spinning in its thread."""
    lane = call.owner
    if call.state != _STARTED or lane is None or lane.abandoned:
        return
    _retire(lane, f"{call.what} blocked the event loop it shared")
    try:
        lane.loop.call_soon_threadsafe(lane.loop.stop)
    except RuntimeError:
        pass
    if lane.ident is not None:
        raise_in(lane.ident)


async def on_user_loop(make: Callable[[], Any], what: str, seconds: float | None) -> Any:
    """``await make()`` on the user loop; UserCodeTimeout past ``seconds`` of running (None: no limit)."""
    loop = asyncio.get_running_loop()
    call = _Call(make, loop, what)
    _submit(call)
    timer = loop.call_later(seconds, _expire, call, seconds) if seconds is not None else None
    try:
        return await call.fut
    finally:
        if timer is not None:
            timer.cancel()
        if call.state != _ENDED:
            _stop(call)
