"""The built-in metrics of a run (``ci_evals.results.measures``) aggregated over its results lines:
summary.json's ``cost_speed`` block, and what a regression gate on one of them pairs with a
baseline.

Every results line counts (each run of each sample: a run's cost is the sum of all it spent),
errored lines included in the run's total cost (what their calls cost before they failed) but
with no value of their own. A line's value can be missing for a reason that is no error: an answer
from the LLM cache has no fresh latency (``cached``), a model with no known price has no cost
(``unknown``, with the reason, which names the model): a gate on such a metric errors with it.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from typing import Any, TypedDict

from ci_evals.gating.stats import percentile
from ci_evals.results.measures import BUILTINS, NAN, Reading, measure_all
from ci_evals.results.records import CostSpeed, MeasureEntry, ResultRecord

NAMES = tuple(BUILTINS)
WIDTH = len(NAMES)
_INDEX = {name: i for i, name in enumerate(NAMES)}
MAX_REASONS = 5


class MeasuredState(TypedDict):
    """:meth:`Measured.state`: plain JSON data, for a worker process to hand to the first."""

    rows: list[list[Any]]  # [model, [value or null, ...]]: one row of WIDTH values per line
    counts: dict[str, list[int]]  # name -> [errors, cached, unknown]
    reasons: dict[str, list[str]]
    queued_s: float
    throttled: int
    unpriced: list[str]
    samples: list[list[Any]] | None  # [model, sample id, [sum per name], [count per name], errored]


class _Missing:
    __slots__ = ("errors", "cached", "unknown", "reasons")

    def __init__(self) -> None:
        self.errors = self.cached = self.unknown = 0
        self.reasons: dict[str, None] = {}  # ordered set


class Measured:
    """Feed results lines with :meth:`add`; :meth:`block` gives summary.json's ``cost_speed``.

    Each line's values are one row of a flat array per model (NaN where a line has none): one
    ``extend`` per line, so 100k lines cost little. ``keep_samples``: also keep each (model,
    sample)'s values (its runs' mean), which a regression gate on a built-in metric pairs with the
    baseline's (:meth:`sample_values`).
    """

    def __init__(self, *, keep_samples: bool = False) -> None:
        self.rows: dict[str | None, array[float]] = {}
        self.missing = [_Missing() for _ in NAMES]
        self.queued_s = 0.0
        self.throttled = 0
        self.unpriced: set[str] = set()
        # (model, sample id) -> ([sum per name], [count per name], errored)
        self.samples: dict[tuple[str | None, str], tuple[list[float], list[int], bool]] | None = (
            {} if keep_samples else None
        )

    def add(self, rec: ResultRecord) -> None:
        model = rec.get("model")
        values, missing = measure_all(rec)
        rows = self.rows.get(model)
        if rows is None:
            rows = self.rows[model] = array("d")
        rows.extend(values)
        for i, reading in missing:
            self._missing(self.missing[i], reading)
        if self.samples is not None:
            self._keep(rec, model, values)
        queued, throttled = rec.get("queued_s"), rec.get("throttled")
        if queued:
            self.queued_s += _number(queued)
        if throttled:
            self.throttled += int(_number(throttled))
        target = rec.get("target")
        if target:
            self._unpriced(target)
        for grade in rec.get("grades", {}).values():
            if type(grade) is dict and grade.get("metadata"):
                self._unpriced(grade["metadata"])

    def _keep(self, rec: ResultRecord, model: str | None, values: list[float]) -> None:
        """Add a line's values to its (model, sample)'s, for a baseline's pairing."""
        assert self.samples is not None
        key = (model, str(rec["sample_id"]))
        kept = self.samples.get(key)
        if kept is None:
            kept = self.samples[key] = ([0.0] * WIDTH, [0] * WIDTH, False)
        if rec.get("error"):
            self.samples[key] = (kept[0], kept[1], True)
            return
        for i, value in enumerate(values):
            if value == value:  # not NaN
                kept[0][i] += value
                kept[1][i] += 1

    @staticmethod
    def _missing(one: _Missing, reading: Reading) -> None:
        if reading.errored:
            one.errors += 1
        elif reading.cached:
            one.cached += 1
        else:
            one.unknown += 1
            if reading.unknown and len(one.reasons) < MAX_REASONS:
                one.reasons[reading.unknown] = None

    def _unpriced(self, where: Any) -> None:
        if isinstance(where, Mapping) and where.get("unpriced"):
            found = where["unpriced"]
            for model in found if isinstance(found, list) else [found]:
                if len(self.unpriced) < 50:
                    self.unpriced.add(str(model)[:200])

    def _values(self, name: str, model: str | None = None, *, every: bool = True) -> list[float]:
        """The measured values of ``name`` (of ``model``, or of every model when ``every``)."""
        i = _INDEX[name]
        chosen = self.rows.values() if every else [self.rows.get(model, array("d"))]
        return [v for rows in chosen for v in rows[i::WIDTH] if v == v]

    def lines(self) -> int:
        """Results lines read."""
        return sum(len(rows) for rows in self.rows.values()) // WIDTH

    def entry(self, name: str) -> MeasureEntry:
        """One built-in metric over every line."""
        missing, b = self.missing[_INDEX[name]], BUILTINS[name]
        values = sorted(self._values(name))
        k = len(values)
        total = math.fsum(values) if k else None
        return {
            "label": b.label,
            "unit": b.unit,
            "n": self.lines(),
            "measured": k,
            "errors": missing.errors,
            "cached": missing.cached,
            "unknown": missing.unknown,
            "unknown_reasons": list(missing.reasons),
            "mean": total / k if total is not None else None,
            "median": percentile(values, 50) if k else None,
            "p95": percentile(values, 95) if k else None,
            "p99": percentile(values, 99) if k else None,
            "min": values[0] if k else None,
            "max": values[-1] if k else None,
            "sum": total,
        }

    def block(self, cost_usd: float | None, retries: int, cache_hits: int) -> CostSpeed:
        """summary.json's ``cost_speed`` (the budget is the runner's to add)."""
        return {
            "metrics": {name: self.entry(name) for name in NAMES},
            "queued_s": round(self.queued_s, 6),
            "throttled": self.throttled,
            "retries": retries,
            "cache_hits": cache_hits,
            "cost_usd": round(cost_usd, 6) if cost_usd is not None else None,
            "unpriced": sorted(self.unpriced),
        }

    def total(self, name: str, model: str | None = None) -> float:
        """The sum of metric ``name`` over every line (of ``model`` when given)."""
        return math.fsum(self._values(name, model, every=model is None))

    def sample_values(self, name: str) -> dict[tuple[str | None, str], float | None]:
        """Each (model, sample)'s value of ``name``, its runs' mean; None when a run errored or
        nothing was measured."""
        i = _INDEX[name]
        out: dict[tuple[str | None, str], float | None] = {}
        for key, (sums, counts, errored) in (self.samples or {}).items():
            out[key] = None if errored or not counts[i] else sums[i] / counts[i]
        return out

    def state(self) -> MeasuredState:
        return {
            "rows": [
                [model, [v if v == v else None for v in rows]] for model, rows in self.rows.items()
            ],
            "counts": {
                name: [m.errors, m.cached, m.unknown]
                for name, m in zip(NAMES, self.missing, strict=True)
            },
            "reasons": {name: list(m.reasons) for name, m in zip(NAMES, self.missing, strict=True)},
            "queued_s": self.queued_s,
            "throttled": self.throttled,
            "unpriced": sorted(self.unpriced),
            "samples": None
            if self.samples is None
            else [[*key, s, c, e] for key, (s, c, e) in self.samples.items()],
        }

    def merge(self, state: MeasuredState) -> None:
        for model, values in state["rows"]:
            rows = self.rows.setdefault(model, array("d"))
            rows.extend(NAN if v is None else v for v in values)
        for name, m in zip(NAMES, self.missing, strict=True):
            errors, cached, unknown = state["counts"][name]
            m.errors += errors
            m.cached += cached
            m.unknown += unknown
            for reason in state["reasons"][name]:
                if len(m.reasons) < MAX_REASONS:
                    m.reasons[reason] = None
        self.queued_s += state["queued_s"]
        self.throttled += state["throttled"]
        self.unpriced.update(state["unpriced"])
        if self.samples is not None and state["samples"] is not None:
            for model, sid, sums, counts, errored in state["samples"]:
                self.samples[(model, sid)] = (sums, counts, errored)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0.0
    return float(value)
