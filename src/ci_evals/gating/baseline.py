"""Comparing a run with a baseline results folder (e.g. the last run on main).

Per metric: baseline value, current value, delta. Per sample, matched by (model, sample id):
regressions (passed before, fails now), improvements, new and removed samples. Regression gates
(``max_drop``, ``max_regressions``) read their facts from here.

Under a noisy grader the gates decide on paired evidence (:mod:`ci_evals.gating.noise`): the
facts a regression gate gets carry the per-sample differences of its metric over the samples both
runs graded, the improvements beside the regressions, and whether the metric is noisy (an LLM or
agent judge, or repeats that disagree in either run).

Missing evidence is never a pass: a folder without summary.json or results.jsonl, an empty
results.jsonl, another suite's results, or a metric the baseline does not have (added or renamed
since) gives the regression gate ``{"missing": why}``, so it reports ``no_baseline`` and follows
its ``on_missing_baseline``. A summary.json that is not JSON is bad input (exit 2).

The folder is read once: the same pass keeps the baseline's grades that report.html shows beside
this run's, and :meth:`Baseline.comparison` hands every report the one comparison
(:mod:`ci_evals.gating.comparison`). :func:`compare_folder` builds it for a results folder written
earlier (``ci-evals report``), through the same code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypedDict

from ci_evals._util.errors import ConfigError
from ci_evals.core.rule import passes
from ci_evals.gating.aggregate import Aggregator, Model
from ci_evals.gating.comparison import (
    BaselineGrades,
    Comparison,
    RowKey,
    regressed_index,
    row_key,
    shown_grades,
)
from ci_evals.gating.gates import GateSpec, metric_value
from ci_evals.gating.measured import Measured
from ci_evals.gating.regression import GateFacts
from ci_evals.gating.stats import summarize
from ci_evals.results.files import RESULTS, SUMMARY, Trust, foreign_shape, read_summary, records
from ci_evals.results.records import (
    BaselineBlock,
    BaselineMetric,
    CostSpeed,
    MeasureDelta,
    MetricEntry,
    SampleChange,
    Summary,
)

JUDGE_KINDS = frozenset({"rubric", "model_judge", "letta_judge", "score_model", "label_model"})
"""Grader kinds whose score comes from a model's judgement: the same answer may score otherwise on
another call, so their regression gates decide on evidence, not on counts."""


class Diff(TypedDict):
    """The samples that changed between the baseline and this run, matched by (model, sample id)."""

    regressions: list[SampleChange]
    improvements: list[SampleChange]
    new: list[str | int]  # sample ids, as summary.json's baseline block has them
    removed: list[str | int]


class Baseline:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.missing: str | None = None
        self.summary: Summary = {}
        self.agg: Aggregator | None = None
        self.current: Aggregator | None = None
        self.suite: str | None = None
        self._diffs: dict[Model, Diff] = {}  # computed once the current run has finished
        self._aggs: dict[tuple[str, Model], MetricEntry] = {}  # the baseline's, per (metric, model)
        self.grades: dict[RowKey, BaselineGrades] = {}  # as report.html shows them, per line
        summary_path = folder / SUMMARY
        if not folder.is_dir():
            self.missing = f"baseline folder {folder} does not exist"
            return
        if not os.path.lexists(summary_path):
            self.missing = f"baseline folder {folder} has no summary.json"
            return
        self.summary = read_summary(folder, Trust.OTHER, what="baseline summary.json").copy()
        config = self.summary.get("config")
        if not config:
            raise ConfigError(
                "baseline summary.json has no 'config' block (written by an older version?)",
                file=str(summary_path),
            )
        with foreign_shape(str(summary_path), "baseline summary.json"):
            self.agg = agg = Aggregator(config, keep_outcomes=True)
        if not os.path.lexists(folder / RESULTS):
            self.missing = f"baseline folder {folder} has no results.jsonl"
            return
        with foreign_shape(str(folder / RESULTS), "baseline results.jsonl"):
            for rec in records(folder / RESULTS, Trust.OTHER, what="baseline results.jsonl"):
                agg.add(rec)
                self.grades[row_key(rec)] = shown_grades(rec)
            agg.flush_pending()
        if not agg.records:
            self.missing = f"baseline results.jsonl in {folder} is empty"

    def attach(self, current: Aggregator, suite: str | None = None) -> None:
        """The run being compared (its aggregator must keep per-sample outcomes) and its suite name."""
        self.current = current
        self.suite = suite
        self._diffs = {}
        theirs = self.summary.get("suite")
        if not self.missing and suite is not None and theirs != suite:
            self.missing = f"the baseline is of suite {theirs!r}, not {suite!r}"
            self.grades = {}  # another suite's lines: never shown beside this run's

    def _diff(self, model: Model = None) -> Diff:
        if model not in self._diffs:
            self._diffs[model] = self._compute_diff(model)
        return self._diffs[model]

    def _compute_diff(self, model: Model = None) -> Diff:
        before = (self.agg.outcomes if self.agg and not self.missing else None) or {}
        now = (self.current.outcomes if self.current else None) or {}
        regressions: list[SampleChange] = []
        improvements: list[SampleChange] = []
        for key, metrics in now.items():
            if model is not None and key[0] != model:
                continue
            old = before.get(key)
            if old is None:
                continue
            for name, (_, ok) in metrics.items():
                if name in old and old[name][1] != ok:
                    entry: SampleChange = {"sample_id": key[1], "model": key[0], "metric": name}
                    (improvements if ok else regressions).append(entry)
        new: list[str | int] = sorted(
            {k[1] for k in now if k not in before and (model is None or k[0] == model)}
        )
        removed: list[str | int] = sorted(
            {k[1] for k in before if k not in now and (model is None or k[0] == model)}
        )
        return {
            "regressions": regressions,
            "improvements": improvements,
            "new": new,
            "removed": removed,
        }

    def gate_facts(self, gate: GateSpec, model: Model = None) -> GateFacts:
        """What a regression gate needs: the baseline's value of its metric and the regression count,
        or ``{"missing": why}`` when the baseline cannot say."""
        theirs = self.agg
        if self.missing or theirs is None:  # (no aggregator: missing says why)
            return {"missing": str(self.missing)}
        name = gate.metric_key
        if name in self.current_builtins():
            return self._builtin_facts(gate, name, model)
        if name is None or name not in theirs.names:
            return {"missing": f"the baseline has no metric {name!r} (added or renamed since?)"}
        if model is not None and model not in theirs.metrics:
            return {"missing": f"the baseline has no results for model {model!r}"}
        value = metric_value(gate, self._aggregate(theirs, name, model))
        if value is None:
            return {"missing": f"the baseline's {name!r} has no graded sample"}
        diff = self._diff(model)
        return {
            "value": value,
            "regressions": sum(1 for r in diff["regressions"] if r["metric"] == name),
            "improvements": sum(1 for r in diff["improvements"] if r["metric"] == name),
            "diffs": self.paired(name, model, accuracy=gate.metric == "accuracy"),
            "noisy": self.noisy(name),
        }

    def current_builtins(self) -> list[str]:
        """The built-in metrics the current run gates (ci_evals.results.measures)."""
        return self.current.builtins if self.current else []

    def _builtin_facts(self, gate: GateSpec, name: str, model: Model) -> GateFacts:
        """A regression gate's facts for a built-in metric (latency, cost_usd...): every results
        line has it, so the baseline has it whether or not it gated it; samples are paired on their
        values (their runs' mean), and pass or fail by this run's per-sample rule."""
        theirs, now = self.agg, self.current
        if theirs is None or now is None:
            return {"missing": str(self.missing or "no run to compare")}
        rule = now.rules.get(name, ("gte", 0.0))
        before = _of_model(theirs.measured, name, model)
        after = _of_model(now.measured, name, model)
        graded = sorted(v for v in before.values() if v is not None)
        if not graded:
            return {"missing": f"the baseline has no measured {name!r}"}
        agg = summarize(
            graded,
            sum(passes(v, *rule) for v in graded),
            sum(v is None for v in before.values()),
        )
        agg["sum"] = theirs.measured.total(name, model)
        value = metric_value(gate, agg)
        if value is None:
            return {"missing": f"the baseline's {name!r} has no measured sample"}
        diffs: list[float] = []
        regressions = improvements = 0
        for key, v_now in after.items():
            v_old = before.get(key)
            if v_now is None or v_old is None:
                continue
            ok_now, ok_old = passes(v_now, *rule), passes(v_old, *rule)
            diffs.append(
                float(ok_now) - float(ok_old) if gate.metric == "accuracy" else v_now - v_old
            )
            regressions += ok_old and not ok_now
            improvements += ok_now and not ok_old
        return {
            "value": value,
            "regressions": regressions,
            "improvements": improvements,
            "diffs": diffs,
            "noisy": True,  # timings vary; so do tokens and steps of a sampled model
        }

    def cost_speed_block(self, current: CostSpeed | None) -> dict[str, MeasureDelta]:
        """summary.json's ``baseline.cost_speed``: each built-in metric before and now."""
        theirs = self.agg
        if current is None or theirs is None or self.missing:
            return {}
        out: dict[str, MeasureDelta] = {}
        for name, now in (current.get("metrics") or {}).items():
            before = theirs.measured.entry(name)
            if not before["measured"] and not now.get("measured"):
                continue
            mean, b_mean = now.get("mean"), before["mean"]
            out[name] = {
                "baseline_mean": b_mean,
                "mean": mean,
                "baseline_p95": before["p95"],
                "p95": now.get("p95"),
                "baseline_sum": before["sum"],
                "sum": now.get("sum"),
                "change_mean": (mean - b_mean) / b_mean
                if mean is not None and b_mean not in (None, 0)
                else None,
            }
        return out

    def _aggregate(self, theirs: Aggregator, name: str, model: Model = None) -> MetricEntry:
        """The baseline's aggregate of metric ``name``, computed once (every gate on the metric and
        the summary's block read the same one)."""
        key = (name, model)
        if key not in self._aggs:
            self._aggs[key] = theirs.aggregate(name, model)
        return self._aggs[key]

    def paired(self, name: str, model: Model = None, *, accuracy: bool = False) -> list[float]:
        """``now - before`` of metric ``name`` for every sample graded in both runs (its pass as 0/1
        for an accuracy gate), in the current run's order."""
        before = (self.agg.outcomes if self.agg else None) or {}
        now = (self.current.outcomes if self.current else None) or {}
        out: list[float] = []
        for key, metrics in now.items():
            if model is not None and key[0] != model:
                continue
            old = before.get(key)
            if old is None or name not in old or name not in metrics:
                continue
            (s_now, ok_now), (s_old, ok_old) = metrics[name], old[name]
            if accuracy:
                out.append(float(ok_now) - float(ok_old))
            elif s_now is not None and s_old is not None:
                out.append(s_now - s_old)
        return out

    def noisy(self, name: str) -> bool:
        """Whether metric ``name`` is graded by a judge, or its repeats disagree in either run."""
        kinds = [
            agg.config["graders"].get(name, {}).get("kind")
            for agg in (self.agg, self.current)
            if agg
        ]
        if any(k in JUDGE_KINDS for k in kinds):
            return True
        return any(
            agg.repeats.get(name) is not None and agg.repeats[name].disagree
            for agg in (self.agg, self.current)
            if agg
        )

    def summary_block(
        self, summary_metrics: dict[str, MetricEntry], cost_speed: CostSpeed | None = None
    ) -> BaselineBlock:
        """The ``baseline`` block of summary.json (``cost_speed``: this run's, compared too)."""
        theirs = self.agg
        if self.missing or theirs is None:  # (no aggregator: missing says why)
            return {
                "folder": str(self.folder),
                "missing": self.missing,
                "suite": self.summary.get("suite"),
                "finished_at": self.summary.get("finished_at"),
                "metrics": {},
                "regressions": [],
                "improvements": [],
                "new": [],
                "removed": [],
            }
        metrics: dict[str, BaselineMetric] = {}
        for name, cur in summary_metrics.items():
            b: MetricEntry = self._aggregate(theirs, name) if name in theirs.names else {}
            metrics[name] = {
                "baseline_mean": b.get("mean"),
                "mean": cur["mean"],
                "delta_mean": _delta(cur["mean"], b.get("mean")),
                "baseline_pass_rate": b.get("pass_rate"),
                "pass_rate": cur["pass_rate"],
                "delta_pass_rate": _delta(cur["pass_rate"], b.get("pass_rate")),
            }
            if name in theirs.repeats and theirs.repeats[name].samples:
                metrics[name]["baseline_noise"] = theirs.repeats[name].report()
        return {
            "folder": str(self.folder),
            "missing": None,
            "suite": self.summary.get("suite"),
            "finished_at": self.summary.get("finished_at"),
            "metrics": metrics,
            **self._diff(),
            "cost_speed": self.cost_speed_block(cost_speed),
        }

    def comparison(
        self, summary_metrics: dict[str, MetricEntry], cost_speed: CostSpeed | None = None
    ) -> Comparison:
        """The finished run compared with this baseline, as every report shows it: the summary's
        block (for ``summary_metrics``, this run's), its regressions by (model, sample id), and the
        baseline's grades per line (none when the baseline cannot be compared)."""
        block = self.summary_block(summary_metrics, cost_speed)
        if block.get("missing"):
            return Comparison(block)
        return Comparison(block, regressed_index(block), self.grades)


def compare_folder(summary: Summary, folder: Path, baseline: Path, trust: Trust) -> Comparison:
    """The comparison of a results folder written earlier (its ``summary``, and its results.jsonl
    read at ``trust``) with the ``baseline`` folder (``ci-evals report``, which may name another
    baseline than the run did): each folder read once, this one's lines first (each checked before
    anything renders them), the regressions after the suite's reducer as a run finds them."""
    config = summary.get("config")
    with foreign_shape(str(folder / SUMMARY), "summary.json"):
        current = Aggregator(config, keep_outcomes=True) if config else None
    with foreign_shape(str(folder / RESULTS), RESULTS):
        for rec in records(folder / RESULTS, trust):
            if current is not None:
                current.add(rec)
        if current is not None:
            current.flush_pending()
    base = Baseline(baseline)
    if current is None:
        base.missing = base.missing or (
            "summary.json has no 'config' block (written by an older version?): "
            "its samples cannot be matched with the baseline's"
        )
        return base.comparison({})
    base.attach(current, suite=summary.get("suite"))
    with foreign_shape(str(folder / SUMMARY), "summary.json"):
        return base.comparison(summary.get("metrics") or {}, summary.get("cost_speed"))


def _of_model(
    measured: Measured, name: str, model: Model
) -> dict[tuple[str | None, str], float | None]:
    values = measured.sample_values(name)
    return values if model is None else {k: v for k, v in values.items() if k[0] == model}


def _delta(now: float | None, before: float | None) -> float | None:
    return None if now is None or before is None else now - before
