"""One pass over results.jsonl for the reports: failure counts, score histograms, the worst samples,
and how a sample is named and its input shown.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

BUCKETS = 10
"""Score histogram buckets of [0, 1]."""


@dataclass
class Digest:
    """What the reports need from results.jsonl, gathered in one streaming pass."""

    worst: list[dict[str, Any]] = field(default_factory=list)
    failing_rows: int = 0
    histograms: dict[str, list[int]] = field(default_factory=dict)
    distinct: dict[str, set[float]] = field(default_factory=dict)


def row_failures(row: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The (metric, grade) pairs of one result line that were graded and did not pass.

    Errored grades are not failures on a score: they are reported once, grouped by message
    (``errors.groups``), not once per sample and grader."""
    return [(name, g) for name, g in (row.get("grades") or {}).items()
            if not g.get("passed") and not g.get("error")]


def _worst_key(row: dict[str, Any]) -> tuple:
    scores = [float(g.get("score") or 0.0) for _, g in row_failures(row)] or [0.0]
    return (
        min(scores),
        str(row.get("sample_id")),
        row.get("run") or 0,
        str(row.get("model") or ""),
    )


def digest(results: Iterable[dict[str, Any]], worst: int = 10) -> Digest:
    """Stream ``results`` once: the ``worst`` failing lines (lowest score first) and score histograms.

    Memory stays bounded by ``worst`` however long results.jsonl is.
    """
    d = Digest()

    def failing() -> Iterable[dict[str, Any]]:
        for row in results:
            for name, g in (row.get("grades") or {}).items():
                if g.get("error") is None and g.get("score") is not None:
                    score = float(g["score"])
                    bucket = min(max(int(score * BUCKETS), 0), BUCKETS - 1)
                    d.histograms.setdefault(name, [0] * BUCKETS)[bucket] += 1
                    seen = d.distinct.setdefault(name, set())
                    if len(seen) < 3:
                        seen.add(score)
            if not row.get("error") and row_failures(row):
                d.failing_rows += 1
                yield row

    d.worst = heapq.nsmallest(worst, failing(), key=_worst_key)
    return d


def sample_label(row: dict[str, Any], num_runs: int = 1) -> str:
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
