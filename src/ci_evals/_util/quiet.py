"""Start background work once the run's event loop has gone quiet (issue 41 item 7).

A run loads what its end needs (the reports' modules, Jinja2, report.html's template: 25-35 ms
of CPU) and the price list its answers need (70 ms without today's memo) on threads while it
waits on the network; but a thread started beside the first wave of requests takes the
interpreter's lock from it, and every request of that wave went out later (seen at N=50, C=50:
the end's thread ran from 288 to 314 ms, the first request left at 319 ms; without the memo the
price list's thread held it back 45-75 ms). So those threads start once the loop is quiet: a
short timer comes back on time, which it does only when nothing else ran in between (the
requests are written, every worker waits on an answer).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

TICK_S = 0.002
"""The timer that probes the loop: back within :data:`LATE_FACTOR` times this, the loop was idle."""
LATE_FACTOR = 2.0
LATEST_S = 1.0
"""A loop never quiet this long (CPU-bound jobs) starts the work anyway."""


async def when_quiet(
    start: Callable[[], None], tick: float = TICK_S, latest: float = LATEST_S
) -> None:
    """Call ``start()`` once the running loop has gone quiet, or after ``latest`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + latest
    while True:
        before = loop.time()
        await asyncio.sleep(tick)
        now = loop.time()
        if now - before <= LATE_FACTOR * tick or now >= deadline:
            break
    start()


def thread_when_quiet(work: Callable[[], None], name: str) -> asyncio.Task[None]:
    """A task that starts ``work`` on a daemon thread called ``name`` once the loop is quiet
    (:func:`when_quiet`); cancel it when the run ends first (its end then loads what it needs)."""
    thread = threading.Thread(target=work, name=name, daemon=True)
    return asyncio.get_running_loop().create_task(when_quiet(thread.start))
