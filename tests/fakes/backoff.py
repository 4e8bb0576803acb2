"""Watching the Letta retries wait, without waiting: the jitter's draws and the sleeps, recorded.

:func:`watch_letta_backoff` puts a recording RNG in place of the one every Letta
:class:`~ci_evals._util.retry.Backoff` draws its jitter from (:data:`ci_evals._util.retry.JITTER`) and an
``asyncio.sleep`` that records its delay (but the idle-loop probe's) and does not wait. A test then checks each retry's jitter
range (``[bound / 2, bound]``, the bound doubling up to the cap) and that each wait slept is the
value drawn from it (or the server's ``Retry-After`` when that is longer).
"""

from __future__ import annotations

import asyncio
import random
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from ci_evals._util import quiet, retry


class RecordingRandom(random.Random):
    """A seeded RNG that records every ``uniform(a, b)`` asked of it and what it drew."""

    def __init__(self, seed: int = 39) -> None:
        super().__init__(seed)
        self.ranges: list[tuple[float, float]] = []
        self.drawn: list[float] = []

    def uniform(self, a: float, b: float) -> float:
        x = super().uniform(a, b)
        self.ranges.append((a, b))
        self.drawn.append(x)
        return x


@dataclass
class Watched:
    rng: RecordingRandom
    slept: list[float] = field(default_factory=list)

    def bounds(self) -> list[float]:
        """Each retry's bound (the upper end of its jitter range), checking the lower end is half."""
        assert all(a == b / 2 for a, b in self.rng.ranges), self.rng.ranges
        return [b for _, b in self.rng.ranges]


def watch_letta_backoff(monkeypatch: pytest.MonkeyPatch) -> Watched:
    watched = Watched(RecordingRandom())
    monkeypatch.setattr(retry, "JITTER", watched.rng)
    real_sleep = asyncio.sleep

    async def sleep(delay: float, result: Any = None) -> Any:
        # the library's own zero-second yields are not retries, nor the timer that probes whether
        # the loop is idle before the run's background threads start (ci_evals._util.quiet)
        if delay > 0 and sys._getframe(1).f_globals.get("__name__") != quiet.__name__:
            watched.slept.append(delay)
        return await real_sleep(0, result)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    return watched
