"""Garbage collection while a run or its reports stream records: rarer, and never over the
start-up heap.

A run allocates a few dozen short-lived containers per sample (the record, its grades, the parsed
lines; at 200 calls in flight also each call's request, response and parsed JSON) and keeps almost
none, so CPython's default young-generation threshold (700 allocations) collects every few
samples, and each full collection walks the whole heap: every module, class and pydantic schema
imported at start-up, which never becomes garbage. Measured (issue 21): 230-260 collections, 13-15 %
of the CPU of a 4,000-call run at C=200; a large share of a 100k-sample replay.

:func:`streaming` moves what exists when it starts to the permanent generation (``gc.freeze``) and
raises the first threshold to :data:`YOUNG_THRESHOLD` for the block (never lowering it, and
leaving a disabled collector off), then restores both, so a process that runs many suites (the
test suite, the Action) ends as it began. Records hold no reference cycles, so memory does not
grow for it: cycles (a rare user object) are still collected, less often.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 50_000
"""Allocations between two young-generation collections inside :func:`streaming` (CPython: 700)."""


@contextmanager
def streaming() -> Iterator[None]:
    """The block's garbage collection: what exists now frozen, young collections rarer."""
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    gc.freeze()
    if before[0]:  # 0: the collector's automatic runs are off; leave them off
        gc.set_threshold(max(before[0], YOUNG_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if not frozen:  # an outer block (the run around its reports) unfreezes at its own end
            gc.unfreeze()
