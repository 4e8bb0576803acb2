"""The "Cost and speed" block of every report: what the run's answers cost and how long they took.

Read from summary.json's ``cost_speed`` (and ``baseline.cost_speed``), never recomputed: one line
or table row per built-in metric that has something to say (``ci_evals.results.measures``), the
waits (queueing, rate limits, retries), the run's cost with the models no price is known for, and
why a budget stopped the run. A summary without ``cost_speed`` (an older folder) shows nothing.

Numbers are formatted one way everywhere: seconds to 3 significant digits (``1.23 s``,
``4.2 ms``), dollars with 4 decimals below $1 and 2 above (``$0.0123``, ``$12.50``), counts with
thousands separators (``12,345``). A value that is not known is ``unknown`` with its reason,
never 0. The texts here are plain: model names and reasons come from the run, and each renderer
escapes them as it escapes the rest (``escape_md``, Jinja2's autoescape, ``one_line``, XML).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ci_evals.results.measures import BUILTINS, index_of, measure_all
from ci_evals.results.records import CostSpeed, MeasureDelta, MeasureEntry, ResultRecord, Summary

UNKNOWN = "unknown"
NONE = "–"
NAMES_SHOWN = 5
"""Unpriced models named (each cut at 80 characters); the rest are counted."""
FOLDED = ("prompt_tokens", "completion_tokens")
"""Shown inside the ``tokens`` line (its split), unless a gate reads them."""
ROW_KEYS = ("latency", "tokens", "cost_usd", "steps", "tool_calls")
"""The per-sample values report.html's table and junit.xml's testcases carry."""


# ---------------------------------------------------------------- numbers


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def fmt_seconds(value: Any) -> str:
    """Seconds to 3 significant digits, in ms or µs below a second: ``1.23 s``, ``4.2 ms``."""
    v = _finite(value)
    if v is None:
        return NONE
    v = float(f"{v:.3g}")  # rounded first: 0.9996 s is "1 s", not "1e+03 ms"
    if v == 0:
        return "0 s"
    if abs(v) >= 1000:
        return f"{v:,.0f} s"
    if abs(v) >= 1:
        return f"{v:.3g} s"
    if abs(v) >= 1e-3:
        return f"{v * 1e3:.3g} ms"
    return f"{v * 1e6:.3g} µs"


def fmt_usd(value: Any) -> str:
    """Dollars: 4 decimals below $1 (``$0.0123``), 2 from $1 (``$12.50``); ``<$0.0001`` for less."""
    v = _finite(value)
    if v is None:
        return NONE
    if v == 0:
        return "$0"
    if abs(v) >= 1:
        return f"${v:,.2f}"
    if abs(v) < 0.00005:
        return "<$0.0001"
    return f"${v:.4f}"


def fmt_count(value: Any) -> str:
    """A count (tokens, steps): ``12,345``; a mean or percentile between whole numbers ``2.5``."""
    v = _finite(value)
    if v is None:
        return NONE
    if abs(v - round(v)) < 1e-9 or abs(v) >= 100:
        return f"{round(v):,}"
    return f"{v:.3g}"


def formatter(unit: str | None) -> Callable[[Any], str]:
    """The format of a built-in metric's values, by its unit (``s``, ``$`` or a count)."""
    return {"s": fmt_seconds, "$": fmt_usd}.get(unit or "", fmt_count)


def unit_of(gate: Any) -> str | None:
    """The unit of a gate's value when it reads a built-in metric (``s``, ``$``, ``""``); None
    for a grader's score, or a pass rate (``accuracy``)."""
    builtin = BUILTINS.get(str(gate.get("metric_key")))
    if builtin is None or gate.get("metric") == "accuracy":
        return None
    return builtin.unit


def fmt_change(change: Any) -> str:
    """A relative change with an arrow, up being worse (slower, dearer): ``+212% ▲``, ``−40% ▼``."""
    v = _finite(change)
    if v is None:
        return NONE
    pct = abs(v) * 100
    text = f"{pct:,.0f}%" if pct >= 9.95 else f"{pct:.1f}%"
    if pct < 0.05:
        return "0% ="
    return f"+{text} ▲" if v > 0 else f"−{text} ▼"


# ---------------------------------------------------------------- what the block shows


@dataclass(frozen=True, slots=True)
class Row:
    """One built-in metric as the block shows it: formatted values and plain-text notes."""

    name: str
    label: str
    mean: str
    p95: str
    max: str
    total: str
    change: str | None  # None: no baseline compared
    notes: list[str] = field(default_factory=list)


def block_of(summary: Summary) -> CostSpeed | None:
    """summary.json's ``cost_speed``, or None (an older folder, or not an object)."""
    block = summary.get("cost_speed")
    return block if isinstance(block, dict) else None


def gated(summary: Summary) -> set[str]:
    """The built-in metrics a gate reads (they are always shown)."""
    names = {g.get("metric_key") for g in summary.get("gates") or [] if isinstance(g, dict)}
    names |= set(summary.get("metrics") or {})
    return {n for n in names if isinstance(n, str) and n in BUILTINS}


def _shown(name: str, e: MeasureEntry, gates: set[str]) -> bool:
    if name in gates:
        return True
    if name in FOLDED:
        return False
    measured, unknown = int(e.get("measured") or 0), int(e.get("unknown") or 0)
    if measured and (_finite(e.get("max")) or _finite(e.get("min"))):
        return True  # values, not all 0 (a target without tokens says nothing)
    if e.get("cached") or (unknown and measured):
        return True
    return any("price" in str(r) for r in e.get("unknown_reasons") or [])


def _notes(e: MeasureEntry) -> list[str]:
    n, notes = int(e.get("n") or 0), []
    if cached := int(e.get("cached") or 0):
        notes.append(f"{cached:,} of {n:,} from the LLM cache, not timed")
    if unknown := int(e.get("unknown") or 0):
        reasons = "; ".join(str(r) for r in (e.get("unknown_reasons") or [])[:3])
        notes.append(f"{UNKNOWN} for {unknown:,} of {n:,}" + (f": {reasons}" if reasons else ""))
    if errors := int(e.get("errors") or 0):
        notes.append(f"{errors:,} errored (no value)")
    return notes


def _split(block: CostSpeed) -> str:
    metrics = block.get("metrics") or {}
    prompt = (metrics.get("prompt_tokens") or {}).get("sum")
    completion = (metrics.get("completion_tokens") or {}).get("sum")
    if _finite(prompt) is None or _finite(completion) is None:
        return ""
    return f" ({fmt_count(prompt)} prompt + {fmt_count(completion)} completion)"


def rows(summary: Summary) -> list[Row]:
    """The metrics the block shows, in the order of ``measures.BUILTINS``: the gated ones, and
    those with a value other than 0, from the cache, or unknown for want of a price."""
    block = block_of(summary)
    if block is None:
        return []
    metrics, gates = block.get("metrics") or {}, gated(summary)
    base = (summary.get("baseline") or {}).get("cost_speed")
    out = []
    for name, e in metrics.items():
        if not isinstance(e, dict) or not _shown(name, e, gates):
            continue
        fmt = formatter(e.get("unit", BUILTINS[name].unit if name in BUILTINS else ""))
        empty = UNKNOWN if e.get("unknown") and not e.get("measured") else NONE

        def show(key: str, e: Any = e, fmt: Callable[[Any], str] = fmt, empty: str = empty) -> str:
            value = e.get(key)
            return empty if value is None else fmt(value)

        total = NONE if e.get("unit") == "s" else show("sum")
        if total not in (NONE, UNKNOWN) and e.get("unknown"):
            total = f"≥ {total}"  # some lines' values are not known
        if name == "tokens" and name not in gates:
            total += _split(block)
        delta: MeasureDelta | None = base.get(name) if isinstance(base, dict) else None
        out.append(
            Row(
                name=name,
                label=str(e.get("label") or name),
                mean=show("mean"),
                p95=show("p95"),
                max=show("max"),
                total=total,
                change=None if not base else fmt_change((delta or {}).get("change_mean")),
                notes=_notes(e),
            )
        )
    return out


def unpriced(block: CostSpeed) -> str:
    """``2 models unpriced: a, b`` (the first five, each cut at 80 characters), or nothing."""
    names = [str(m) for m in block.get("unpriced") or []]
    if not names:
        return ""
    shown = ", ".join(m[:80] for m in names[:NAMES_SHOWN])
    more = f" and {len(names) - NAMES_SHOWN:,} more" if len(names) > NAMES_SHOWN else ""
    return f"{len(names):,} model{'s' if len(names) != 1 else ''} unpriced: {shown}{more}"


def waits(block: CostSpeed) -> str:
    """``queued 1.2 s, 3 throttled, 2 retries`` (the parts that are not 0)."""
    parts = []
    if (queued := _finite(block.get("queued_s"))) and queued >= 0.0005:
        parts.append(f"queued {fmt_seconds(queued)}")
    if throttled := int(_finite(block.get("throttled")) or 0):
        parts.append(f"{throttled:,} throttled")
    if retries := int(_finite(block.get("retries")) or 0):
        parts.append(f"{retries:,} retr{'y' if retries == 1 else 'ies'}")
    return ", ".join(parts)


def run_cost(block: CostSpeed) -> str:
    """``$0.0123 (2 models unpriced: a, b)``: the run's known cost, targets and judges; nothing
    when no price was known and none missing."""
    cost, missing = _finite(block.get("cost_usd")), unpriced(block)
    if cost is None and not missing:
        return ""
    text = fmt_usd(cost) if cost is not None else UNKNOWN
    if missing:
        text = f"{'≥ ' if cost else ''}{text} ({missing})"
    return text


def budget(block: CostSpeed) -> str:
    """``stopped: max_cost_usd $0.50 spent (3 samples not run)``, or the limits and what was
    spent, or nothing without a budget."""
    b = block.get("budget")
    if not isinstance(b, dict):
        return ""
    spent = _finite(b.get("spent_usd"))
    if b.get("stopped"):
        left = int(_finite(b.get("stopped_samples")) or 0)
        tail = f" ({left:,} sample{'s' if left != 1 else ''} stopped)" if left else ""
        return f"stopped: {b['stopped']}{tail}"
    limits = []
    if (cap := _finite(b.get("max_cost_usd"))) is not None:
        limits.append(f"{fmt_usd(spent or 0)} of max {fmt_usd(cap)} spent")
    for key in ("max_steps", "max_tokens"):
        if (cap := _finite(b.get(key))) is not None:
            limits.append(f"{key} {fmt_count(cap)} per sample")
    return ", ".join(limits)


def has_block(summary: Summary) -> bool:
    """Whether the block has anything to show."""
    block = block_of(summary)
    return block is not None and bool(
        rows(summary) or waits(block) or run_cost(block) or budget(block)
    )


# ---------------------------------------------------------------- one results line


def sample_values(rec: ResultRecord) -> dict[str, float | str]:
    """One line's :data:`ROW_KEYS`: a number, or ``cached`` (latency from the LLM cache), or
    ``unknown: <why>`` (a model with no known price); left out when the line has none (errored, or
    the target does not report it: a plain function has no steps). Read from
    :func:`~ci_evals.results.measures.measure_all`'s lists, as :func:`measure_some` would (without
    its :class:`Reading` per value: report.html and junit.xml read this for every line)."""
    values, missing = measure_all(rec)
    why = dict(missing) if missing else {}
    out: dict[str, float | str] = {}
    for name, i in _ROWS:
        reading = why.get(i)
        if reading is None:
            out[name] = values[i]
        elif reading.cached:
            out[name] = "cached"
        elif reading.unknown is not None and "price" in reading.unknown:
            out[name] = f"{UNKNOWN}: {reading.unknown}"
    return out


_ROWS = tuple(zip(ROW_KEYS, index_of(ROW_KEYS), strict=True))


# ---------------------------------------------------------------- junit.xml


def _raw(value: Any) -> str:
    v = _finite(value)
    return "none" if v is None else f"{v:.10g}"


def totals(summary: Summary) -> dict[str, str]:
    """junit.xml's testsuite properties: the shown metrics' mean, p95, max and sum (raw numbers;
    ``unknown`` where no line's value is known), the waits, the run's cost and the budget."""
    block = block_of(summary)
    if block is None:
        return {}
    out: dict[str, str] = {}
    metrics = block.get("metrics") or {}
    for r in rows(summary):
        e: Any = metrics.get(r.name) or {}
        for key in ("mean", "p95", "max", "sum"):
            value = _raw(e.get(key))
            out[f"cost_speed.{r.name}.{key}"] = (
                UNKNOWN if value == "none" and e.get("unknown") else value
            )
    for key in ("queued_s", "throttled", "retries", "cache_hits", "cost_usd"):
        out[f"cost_speed.{key}"] = _raw(block.get(key))
    if block.get("unpriced"):
        out["cost_speed.unpriced"] = ", ".join(str(m) for m in block.get("unpriced") or [])
    if text := budget(block):
        out["cost_speed.budget"] = text
    return out


def testcase_properties(rec: ResultRecord) -> dict[str, str]:
    """junit.xml's properties of one line's testcases: ``latency_s``, ``tokens``, ``cost_usd``,
    ``steps``, ``tool_calls`` (raw numbers, ``cached``, ``unknown: <why>``; left out when none)."""
    return {
        ("latency_s" if k == "latency" else k): (_raw(v) if isinstance(v, float) else v)
        for k, v in sample_values(rec).items()
    }
