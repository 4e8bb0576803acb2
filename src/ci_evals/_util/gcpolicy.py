"""Garbage collection while a run or its reports stream 100k records: rarer, and never over the
start-up heap.

A run allocates a few dozen short-lived containers per sample (the record, its grades, the parsed
lines) and keeps almost none, so CPython's default young-generation threshold (700 allocations)
collects every few samples, and each full collection walks the whole heap: every module, class
and pydantic schema imported at start-up, which never becomes garbage. :func:`streaming` moves
what exists when it starts to the permanent generation (``gc.freeze``) and raises the first
threshold for the block, then restores both. Records hold no reference cycles, so memory does not
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
    gc.freeze()
    gc.set_threshold(max(before[0], YOUNG_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
