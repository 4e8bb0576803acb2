"""What user code raises, made that code's error: the exceptions the user-code lanes report, and
:func:`contained` for user code awaited on the run's own loop (agent factories, a setup script
given the target's client).

``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``, any other ``BaseException`` and an
``asyncio.CancelledError`` that nobody asked the current task for (what ``wait_for`` and client
timeouts raise inside user code) become :class:`UserCodeExit`, an ordinary ``Exception``: the
sample's error, never the end of the run. The run's own cancellation (a signal) still passes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ESCAPES = (SystemExit, KeyboardInterrupt, GeneratorExit)
"""What user code may raise that is not an ``Exception`` but must never end the run."""


class UserCodeTimeout(Exception):
    """A custom function ran past its time limit and was abandoned."""


class UserCodeExit(Exception):
    """User code raised SystemExit, KeyboardInterrupt, GeneratorExit or another BaseException: its
    error, not a way out."""


def escaped(exc: BaseException) -> UserCodeExit:
    """``SystemExit(0)`` as an error whose text names it: ``SystemExit(0)``."""
    args = ", ".join(repr(a) for a in exc.args)
    return UserCodeExit(f"{type(exc).__name__}({args})")


def describe(exc: BaseException) -> str:
    """How a failure of user code reads in an error: ``ValueError: bad``, ``SystemExit(0)``."""
    return str(exc) if isinstance(exc, UserCodeExit) else f"{type(exc).__name__}: {exc}"


def ours() -> bool:
    """Whether a CancelledError seen now is the run's own (the current task was asked to cancel)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop: nothing of ours cancels
        return False
    return task is not None and task.cancelling() > 0


@contextmanager
def contained() -> Iterator[None]:
    """Turn an escape raised inside the block (SystemExit and the like, any other BaseException, a
    CancelledError nobody asked the current task for) into :class:`UserCodeExit`."""
    try:
        yield
    except asyncio.CancelledError as exc:
        if ours():
            raise
        raise escaped(exc) from None
    except Exception:
        raise
    except BaseException as exc:
        raise escaped(exc) from None


class Abandoned(BaseException):
    """Raised inside an abandoned call's thread so Python code spinning there stops burning the CPU
    (and the GIL) that the run's exit needs. Code blocked in C (``time.sleep``) is not reached."""


def raise_in(ident: int) -> None:
    """Raise :class:`Abandoned` in thread ``ident``, at its next Python instruction."""
    import ctypes  # only when a call is abandoned: the run never pays for it otherwise

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(Abandoned))


def settle(fut: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    """Hand a call's outcome to the future its caller awaits (on the caller's loop), unless it is done."""
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)
