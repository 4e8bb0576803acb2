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
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, TypedDict

from ci_evals.gating.stats import percentile
from ci_evals.results.measures import BUILTINS, measure
from ci_evals.results.records import CostSpeed, MeasureEntry, ResultRecord

NAMES = tuple(BUILTINS)
_INDEX = {name: i for i, name in enumerate(NAMES)}
MAX_REASONS = 5


class MeasuredState(TypedDict):
    """:meth:`Measured.state`: plain JSON data, for a worker process to hand to the first."""

    values: dict[str, list[float]]
    sums: list[list[Any]]  # [model, {name: sum}]
    counts: dict[str, list[int]]  # name -> [n, errors, cached, unknown]
    reasons: dict[str, list[str]]
    queued_s: float
    throttled: int
    unpriced: list[str]
    samples: list[list[Any]] | None  # [model, sample id, [sum per name], [count per name], errored]


class _One:
    __slots__ = ("values", "n", "errors", "cached", "unknown", "reasons")

    def __init__(self) -> None:
        self.values = array("d")
        self.n = self.errors = self.cached = self.unknown = 0
        self.reasons: dict[str, None] = {}  # ordered set


class Measured:
    """Feed results lines with :meth:`add`; :meth:`block` gives summary.json's ``cost_speed``.

    ``keep_samples``: also keep each (model, sample)'s values (averaged over its runs), which a
    regression gate on a built-in metric pairs with the baseline's (:meth:`sample_values`).
    """

    def __init__(self, *, keep_samples: bool = False) -> None:
        self.one = {name: _One() for name in NAMES}
        self.sums: dict[str | None, list[float]] = defaultdict(lambda: [0.0] * len(NAMES))
        self.queued_s = 0.0
        self.throttled = 0
        self.unpriced: set[str] = set()
        # (model, sample id) -> ([sum per name], [count per name], errored)
        self.samples: dict[tuple[str | None, str], tuple[list[float], list[int], bool]] | None = (
            {} if keep_samples else None
        )

    def add(self, rec: ResultRecord) -> None:
        model = rec.get("model")
        sums = self.sums[model]
        errored = bool(rec.get("error"))
        kept = None
        if self.samples is not None:
            key = (model, str(rec["sample_id"]))
            kept = self.samples.get(key)
            if kept is None:
                kept = self.samples[key] = ([0.0] * len(NAMES), [0] * len(NAMES), False)
            if errored:
                self.samples[key] = kept = (kept[0], kept[1], True)
        for i, name in enumerate(NAMES):
            one = self.one[name]
            one.n += 1
            reading = measure(rec, name)
            if reading.value is not None:
                one.values.append(reading.value)
                sums[i] += reading.value
                if kept is not None:
                    kept[0][i] += reading.value
                    kept[1][i] += 1
            elif reading.errored:
                one.errors += 1
            elif reading.cached:
                one.cached += 1
            else:
                one.unknown += 1
                if reading.unknown and len(one.reasons) < MAX_REASONS:
                    one.reasons[reading.unknown] = None
        self.queued_s += _number(rec.get("queued_s"))
        self.throttled += int(_number(rec.get("throttled")))
        self._unpriced(rec.get("target"))
        for grade in rec.get("grades", {}).values():
            if isinstance(grade, Mapping):
                self._unpriced(grade.get("metadata"))

    def _unpriced(self, where: Any) -> None:
        if isinstance(where, Mapping) and where.get("unpriced"):
            found = where["unpriced"]
            for model in found if isinstance(found, list) else [found]:
                if len(self.unpriced) < 50:
                    self.unpriced.add(str(model)[:200])

    def entry(self, name: str) -> MeasureEntry:
        """One built-in metric over every line."""
        one, b = self.one[name], BUILTINS[name]
        values = sorted(one.values)
        k = len(values)
        out: MeasureEntry = {
            "label": b.label,
            "unit": b.unit,
            "n": one.n,
            "measured": k,
            "errors": one.errors,
            "cached": one.cached,
            "unknown": one.unknown,
            "unknown_reasons": list(one.reasons),
            "mean": math.fsum(values) / k if k else None,
            "median": percentile(values, 50) if k else None,
            "p95": percentile(values, 95) if k else None,
            "p99": percentile(values, 99) if k else None,
            "min": values[0] if k else None,
            "max": values[-1] if k else None,
            "sum": math.fsum(values) if k else None,
        }
        return out

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
        i = _INDEX[name]
        if model is not None:
            return self.sums[model][i] if model in self.sums else 0.0
        return math.fsum(s[i] for s in self.sums.values())

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
            "values": {name: one.values.tolist() for name, one in self.one.items()},
            "sums": [[model, dict(zip(NAMES, s, strict=True))] for model, s in self.sums.items()],
            "counts": {
                name: [one.n, one.errors, one.cached, one.unknown] for name, one in self.one.items()
            },
            "reasons": {name: list(one.reasons) for name, one in self.one.items()},
            "queued_s": self.queued_s,
            "throttled": self.throttled,
            "unpriced": sorted(self.unpriced),
            "samples": None
            if self.samples is None
            else [[*key, s, c, e] for key, (s, c, e) in self.samples.items()],
        }

    def merge(self, state: MeasuredState) -> None:
        for name, values in state["values"].items():
            one = self.one[name]
            one.values.extend(values)
            n, errors, cached, unknown = state["counts"][name]
            one.n += n
            one.errors += errors
            one.cached += cached
            one.unknown += unknown
            for reason in state["reasons"][name]:
                if len(one.reasons) < MAX_REASONS:
                    one.reasons[reason] = None
        for model, sums in state["sums"]:
            mine = self.sums[model]
            for i, name in enumerate(NAMES):
                mine[i] += sums.get(name, 0.0)
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
