"""What an interrupted run had learned, carried into its ``--resume``.

The records of the samples that finished are in results.jsonl, and ``--resume`` feeds them again;
what the run learned beyond its records is in the summary.json it wrote when it stopped, and
would be lost with a new summary: what it spent (``max_cost_usd`` is the whole run's cap, not each
part's), the agents it left or kept on a Letta server, and its endpoints' calls and throttling.

That summary.json is read as another run's (a malformed one is one error naming it, exit 2) and
carried only when it is the stopped run's own: interrupted or partial, with as many records as
results.jsonl holds. A run killed outright wrote none (or an older run's is there): then what its
records say their calls cost (:func:`spent_by`, the target's and the judges') counts against the
budget, a lower bound (the calls of the samples it had not finished are in no record); its agents
and endpoints are unknown.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci_evals.config.budget import Budget
from ci_evals.letta.agents import merge_blocks
from ci_evals.llm.pool import combined_endpoints
from ci_evals.results.files import SUMMARY, Trust, read_summary
from ci_evals.results.records import Summary

if TYPE_CHECKING:
    from ci_evals.gating.summary import Learned


def previous(folder: Path, records: int) -> Summary | None:
    """The summary.json the stopped run in ``folder`` wrote, when it is that run's (see above)."""
    if not os.path.lexists(folder / SUMMARY):
        return None
    summary = read_summary(folder, Trust.OTHER)
    stopped = summary.get("interrupted_by") or summary.get("partial")
    return summary if stopped and summary.get("records") == records else None


def spent_by(rec: Mapping[str, Any]) -> float:
    """What one results line says its calls cost: the target's ``cost_usd`` and each grade's
    (an errored sample's too: its calls were paid). A value that is not a positive number
    counts 0."""
    target = rec.get("target")
    total = _cost(target.get("cost_usd")) if isinstance(target, dict) else 0.0
    grades = rec.get("grades")
    for grade in grades.values() if isinstance(grades, dict) else ():
        meta = grade.get("metadata") if isinstance(grade, dict) else None
        total += _cost(meta.get("cost_usd")) if isinstance(meta, dict) else 0.0
    return total


def _cost(value: Any) -> float:
    return float(value) if type(value) in (int, float) and value > 0 else 0.0


def charge(budget: Budget, summary: Summary | None, records_spent: float) -> None:
    """Count what the stopped run spent against this one's budget (it may already be spent): its
    summary's figure, else what its records say (``records_spent``, the sum of :func:`spent_by`:
    after a kill outright, or from a summary with no figure)."""
    block = (summary or {}).get("cost_speed") or {}
    spent = (block.get("budget") or {}).get("spent_usd")
    if not isinstance(spent, int | float):
        spent = records_spent
    if spent > 0:
        budget.charge(float(spent))


def onto(learned: Learned, summary: Summary | None) -> Learned:
    """``learned`` with the stopped run's agents and endpoints before this run's own."""
    if summary is None:
        return learned
    endpoints = [summary.get("endpoints") or [], learned.endpoints or []]
    return replace(
        learned,
        letta=merge_blocks([b for b in (summary.get("letta"), learned.letta) if b]),
        endpoints=combined_endpoints(endpoints, side_by_side=False),
    )
