"""The run's errors as summary.json ``errors`` shows them: how many per category, how many samples
they hit, and the distinct messages, most frequent first.

Errors are data: each errored sample is counted against the error budget and every report shows
why. A run whose 100k samples fail in 100k different ways must still write a small summary.json:
after ``MAX_ERROR_GROUPS`` distinct (category, grader, message) groups, a later distinct message is
counted under ``OTHER_MESSAGES`` with its category and grader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ci_evals.results.records import ErrorsBlock

MAX_ERROR_GROUPS = 1000
"""Distinct (category, grader, message) groups kept; later distinct messages are counted together."""
OTHER_MESSAGES = "(other distinct messages)"


class ErrorTally:
    """Errors counted per category (``target``, ``extraction``, ``grading``...) and per group;
    ``samples``: the records that had any error (the aggregator counts them)."""

    __slots__ = ("by_category", "samples", "groups")

    def __init__(self) -> None:
        self.by_category = {"target": 0, "extraction": 0, "grading": 0}
        self.samples = 0
        self.groups: dict[tuple[str, str | None, str], int] = {}

    def add(self, category: str, grader: str | None, message: object) -> None:
        """One error: counted in its category and in its message's group (``grader`` None: the
        target's error, which fails every grader of the sample)."""
        self.by_category[category] = self.by_category.get(category, 0) + 1
        self.group(category, grader, message)

    def group(self, category: str, grader: str | None, message: object, n: int = 1) -> None:
        key = (category, grader, str(message))
        if key not in self.groups and len(self.groups) >= MAX_ERROR_GROUPS:
            key = (category, grader, OTHER_MESSAGES)
        self.groups[key] = self.groups.get(key, 0) + n

    def merge(self, samples: int, by_category: Mapping[str, int], groups: list[list[Any]]) -> None:
        """Add another tally's counts (an aggregator's state: groups as [category, grader, message, n])."""
        self.samples += samples
        for cat, n in by_category.items():
            self.by_category[cat] = self.by_category.get(cat, 0) + n
        for cat, grader, message, n in groups:
            self.group(cat, grader, message, n)

    def summary(self) -> ErrorsBlock:
        """summary.json ``errors``: totals, per category, and the distinct messages most frequent first."""
        groups = sorted(
            self.groups.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or "", kv[0][2])
        )
        return {
            "total": sum(self.by_category.values()),
            "samples": self.samples,
            "by_category": dict(self.by_category),
            "groups": [
                {"category": c, "grader": g, "message": m, "count": k} for (c, g, m), k in groups
            ],
        }
