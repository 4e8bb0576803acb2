"""One pass over results.jsonl for the reports: failure counts, score histograms, the worst samples,
and how a sample is named and its input shown.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ci_evals.results.records import Grade, ResultRecord

BUCKETS = 10
"""Score histogram buckets of [0, 1]."""
_Key = tuple[float, str, int, str]
"""A failing line's place among the worst: (its lowest failing score, sample id, run, model)."""


@dataclass
class Digest:
    """What the reports need from results.jsonl, gathered in one streaming pass."""

    worst: list[ResultRecord] = field(default_factory=list)
    failing_rows: int = 0
    histograms: dict[str, list[int]] = field(default_factory=dict)
    distinct: dict[str, set[float]] = field(default_factory=dict)


def row_failures(row: ResultRecord) -> list[tuple[str, Grade]]:
    """The (metric, grade) pairs of one result line that were graded and did not pass.

    Errored grades are not failures on a score: they are reported once, grouped by message
    (``errors.groups``), not once per sample and grader."""
    return [
        (name, g)
        for name, g in (row.get("grades") or {}).items()
        if not g.get("passed") and not g.get("error")
    ]


class Digester:
    """:func:`digest` fed one result line at a time (:meth:`add`), so one read of results.jsonl can
    feed every report; :attr:`digest` is the outcome so far."""

    def __init__(self, worst: int = 10) -> None:
        self.digest = Digest()
        self.worst = worst
        self._best: list[tuple[_Key, int, ResultRecord]] = []  # (key, arrival, row), sorted
        self._seq = 0

    def add(self, row: ResultRecord) -> None:
        d = self.digest
        low = None  # the lowest failing score (None: no failing grade)
        for name, g in (row.get("grades") or {}).items():
            err = g.get("error")
            score = g.get("score")
            if err is None and score is not None:
                score = float(score)
                hist = d.histograms.get(name)
                if hist is None:
                    hist = d.histograms[name] = [0] * BUCKETS
                    d.distinct[name] = set()
                bucket = int(score * BUCKETS)
                hist[0 if bucket < 0 else BUCKETS - 1 if bucket >= BUCKETS else bucket] += 1
                seen = d.distinct[name]
                if len(seen) < 3:
                    seen.add(score)
            if not err and not g.get("passed"):
                failed = float(g.get("score") or 0.0)
                if low is None or failed < low:
                    low = failed
        if low is not None and not row.get("error"):
            d.failing_rows += 1
            self._offer(low, row)

    def _offer(self, low: float, row: ResultRecord) -> None:
        """Keep the ``worst`` lowest (lowest failing score, sample id, run, model), the earlier line
        first on a tie (as heapq.nsmallest does); ``low`` is the lowest failing score."""
        best = self._best
        self._seq += 1
        full = len(best) >= self.worst
        if full and (not best or low > best[-1][0][0]):  # cannot displace the last one kept
            return
        key = (low, str(row.get("sample_id")), row.get("run") or 0, str(row.get("model") or ""))
        if full and not key < best[-1][0]:
            return
        bisect.insort(best, (key, self._seq, row))
        if len(best) > self.worst:
            best.pop()
        self.digest.worst = [r for _, _, r in best]


def digest(results: Iterable[ResultRecord], worst: int = 10) -> Digest:
    """Stream ``results`` once: the ``worst`` failing lines (lowest score first) and score histograms.

    Memory stays bounded by ``worst`` however long results.jsonl is.
    """
    gather = Digester(worst)
    for row in results:
        gather.add(row)
    return gather.digest


def sample_label(row: ResultRecord, num_runs: int = 1) -> str:
    """``sample 3``, plus the run and the model when they tell result lines apart."""
    label = f"sample {row.get('sample_id')}"
    if num_runs > 1 or (row.get("run") or 0) > 0:
        label += f" run {row.get('run')}"
    if row.get("model"):
        label += f" · {row['model']}"
    return label


def input_text(value: Any) -> str:
    """A sample input as text; multi-turn inputs one turn per paragraph."""
    if isinstance(value, list):
        return "\n\n".join(f"[turn {i + 1}] {v}" for i, v in enumerate(value))
    return "" if value is None else str(value)
