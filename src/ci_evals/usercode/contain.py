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
import os
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


STDIO_FDS = (0, 1, 2)


def refill_stdio() -> None:
    """Descriptors 0, 1 and 2 open again, on /dev/null, where user code closed them (a grader's
    ``os.close(1)``); called as each call of user code returns. A closed one would be the number
    the next file this process opens takes, and a later ``os.close(1)`` in user code, or the stale
    owner of the number (a file whose descriptor user code closed under it) closing "its" file,
    would close that one instead: report.html's import or junit.xml's spool (seen in CI,
    "Bad file descriptor"). Our own output never uses them (ci_evals.run.exits.keep_stdio).

    A number another thread took meanwhile is left to it (only free numbers are filled). This
    cannot help a file another thread opens during a call that closes them, so once user code is
    loaded no thread of ours reads files beside it: the run's end imports after the run
    (ci_evals.run.runner, ``meanwhile``), the price list loads at the first priced call
    (ci_evals.llm.prices.warm)."""
    if all(_is_open(fd) for fd in STDIO_FDS):
        return
    while True:  # each open takes the lowest free number: never one another thread holds
        try:
            fd = os.open(os.devnull, os.O_RDWR)
        except OSError:
            return
        if fd > STDIO_FDS[-1]:
            os.close(fd)
            return
        os.set_inheritable(fd, True)  # as a standard descriptor is


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


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
    finally:
        refill_stdio()


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
