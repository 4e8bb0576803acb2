"""The run's one verdict and its reason (the same in every report).

A leaf module: reports and gates both read it. The reports name each verdict with the words of
``ci_evals.reports.verdicts`` and never decide one themselves.

``passed``: every gate passed (with no gate: no sample errored beyond the run's error budget).
``failed``: a gate failed on measured scores. ``errored``: a gate or the run failed because
samples errored, or no sample could be run. ``interrupted``: the run was stopped by a signal.
``partial``: a merge or resume with samples missing. Each verdict's exit code:
:class:`ci_evals.run.exits.ExitCode`.
"""

from __future__ import annotations

from ci_evals._util.text import CAUSE_CHARS, one_line
from ci_evals.results.records import GateResult, Selection, Summary, Verdict


def display_name(label: str | None, key: str | None) -> str:
    """A metric as every report names it: its display name, with its key when they differ."""
    if key is None and label:  # a letta-evals weighted_average / logical gate names no one metric
        return str(label)
    if not label or label == key:
        return str(key)
    return f"{label} ({key})"


UNSTABLE = 0.9
"""A gate whose status would hold in fewer reruns than this is flagged in every report."""


def stability_note(g: GateResult) -> str:
    """``holds in 97 % of reruns`` (empty for a gate without a stability figure, e.g. an older summary)."""
    stab = g.get("stability")
    if g.get("status") == "no_baseline":  # no rerun brings the missing baseline: nothing to tell
        return ""
    if not isinstance(stab, int | float) or isinstance(stab, bool) or not 0 <= stab <= 1:
        return ""
    shown = f"{stab * 100:.0f}" if stab < 0.995 or stab == 1 else ">99"
    return f"holds in {shown} % of reruns"


def unstable(g: GateResult) -> bool:
    """Whether a gate's status would hold in fewer than 90 % of reruns (an ``undecided`` one always is flagged)."""
    stab = g.get("stability")
    return g.get("status") == "undecided" or (
        isinstance(stab, int | float) and not isinstance(stab, bool) and stab < UNSTABLE
    )


def budget_exceeded(
    errors: int, n: int, max_errors: int | None, max_error_rate: float | None
) -> str | None:
    """Why ``errors`` of ``n`` samples break the budget (``3 of 50 samples errored (max_errors 0)``), or None.

    With neither limit set the budget is 0 errors; with only a rate, only the rate counts.
    """
    if max_errors is None and max_error_rate is None:
        max_errors = 0
    if max_errors is not None and errors > max_errors:
        return f"{errors} of {n} samples errored (max_errors {max_errors})"
    if max_error_rate is not None and n and errors / n > max_error_rate + 1e-12:
        return f"{errors} of {n} samples errored (max_error_rate {max_error_rate:g})"
    return None


def gate_title(g: GateResult) -> str:
    """A gate as written, its metric named as the metric table names it: ``Quality (q) avg_score gte 0.75``."""
    desc = str(g.get("description") or "")
    if g.get(
        "children"
    ):  # a letta-evals weighted_average / logical gate: its own description says it all
        return desc
    key = str(g.get("metric_key"))
    rest = desc[len(key) :].lstrip() if desc.startswith(key) else desc
    return f"{display_name(g.get('label'), key)} {rest}".rstrip()


def decide(summary: Summary) -> tuple[Verdict, str]:
    """(verdict, one-line reason) from a summary's gates, errors, counts and completeness.

    An errored verdict caused by a stopped endpoint (its breaker) leads with that cause. A run of
    chosen samples (``selection``: ``--sample-id``, ``--sample-pattern``, ``--only-failed``) keeps
    its verdict word and says in the reason that it is partial.
    """
    verdict, reason = _decide(summary)
    stopped = _stopped(summary) if verdict == "errored" else None
    if stopped:
        reason = f"{stopped}; {reason}"
    chosen = summary.get("selection")
    if isinstance(chosen, dict):
        reason = f"{reason}; {selection_note(chosen)}"
    return verdict, reason


def selection_note(selection: Selection) -> str:
    """``partial run: 2 of 6 samples (--only-failed ci-evals-results)``."""
    by = selection.get("by")
    how = "; ".join(str(b) for b in by) if isinstance(by, list) else ""
    return f"partial run: {selection.get('selected')} of {selection.get('total')} samples ({how})"


def _budget_stop(summary: Summary) -> str | None:
    """Why the run stopped calling (``max_cost_usd`` spent): never a pass, whatever the gates say;
    the samples it did not run are errors."""
    cost = summary.get("cost_speed")
    budget = cost.get("budget") if isinstance(cost, dict) else None
    stopped = budget.get("stopped") if isinstance(budget, dict) else None
    if not stopped:
        return None
    left = budget.get("stopped_samples") if isinstance(budget, dict) else None
    tail = f"; {left} samples were stopped by a budget" if left else ""
    return f"stopped calling: {stopped}{tail}"


def _decide(summary: Summary) -> tuple[Verdict, str]:
    gates = summary.get("gates") or []
    errors = summary.get("errors") or {}
    n = int(summary.get("n_samples") or 0)
    if summary.get("interrupted_by"):
        return "interrupted", f"interrupted by {summary['interrupted_by']} after {n} samples"
    if summary.get("partial"):
        return "partial", summary.get("partial_reason") or "samples are missing"
    spent = _budget_stop(summary)
    if spent:
        return "errored", spent
    if n == 0:
        shard = summary.get("shard")
        if isinstance(shard, dict) and not summary.get(
            "records"
        ):  # a shard that was dealt no sample
            return "passed", (
                f"shard {shard.get('index')}/{shard.get('count')} holds none of the "
                f"{shard.get('selected')} selected samples: nothing to gate here; "
                "the merged shards carry the verdict"
            )
        return "errored", "no sample ran"
    config = summary.get("config") or {}
    if not gates:
        errored = int(
            errors.get("samples", errors.get("total")) or 0
        )  # older summaries: total only
        over = budget_exceeded(errored, n, config.get("max_errors"), config.get("max_error_rate"))
        if over:
            return "errored", f"{over}; no gate configured"
        return (
            "passed",
            f"no gate configured; {n} samples ran without error"
            if not errored
            else f"no gate configured; {errored} of {n} samples errored (within the error budget)",
        )
    bad = [g for g in gates if not g.get("passed")]
    if not bad:
        undecided = [g for g in gates if g.get("status") == "undecided"]
        note = (
            (
                f" ({len(undecided)} undecided: {display_name(undecided[0].get('label'), undecided[0].get('metric_key'))}"
                " changed past its limit, but within noise)"
            )
            if undecided
            else ""
        )
        return (
            "passed",
            f"{len(gates)} of {len(gates)} gates passed{note}{_ungated_errors(summary, gates)}",
        )
    errored_gates = [g for g in bad if g.get("status") == "errored"]
    first = (errored_gates or bad)[0]
    more = f" (and {len(bad) - 1} more gate{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""
    reason = (
        f"{display_name(first.get('label'), first.get('metric_key'))}: {first.get('reason')}{more}"
    )
    return ("errored" if errored_gates else "failed"), reason


def _ungated_errors(summary: Summary, gates: list[GateResult]) -> str:
    """``; not gated: 5 of 5 samples errored in style`` for metrics no gate reads (empty when none errored)."""
    gated = {g.get("metric_key") for g in gates} | {
        c.get("metric_key") for g in gates for c in g.get("children") or []
    }
    metrics = summary.get("metrics")
    if not isinstance(metrics, dict):
        metrics = {}
    parts = [
        f"{m.get('errors')} of {m.get('n')} samples errored in {display_name(m.get('label'), name)}"
        for name, m in metrics.items()
        if name not in gated
        and isinstance(m, dict)
        and isinstance(m.get("errors"), int)
        and m["errors"] > 0
    ]
    return f"; not gated: {', '.join(parts)}" if parts else ""


def _stopped(summary: Summary) -> str | None:
    """The first endpoint breaker's line (``stopped calling ...``), if the run stopped calling one."""
    for ep in summary.get("endpoints") or []:
        if isinstance(ep, dict) and isinstance(ep.get("stopped"), str):
            return one_line(ep["stopped"], CAUSE_CHARS)
    return None
