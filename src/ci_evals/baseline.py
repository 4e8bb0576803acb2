"""Comparing a run with a baseline results folder (e.g. the last run on main).

Per metric: baseline value, current value, delta. Per sample, matched by (model, sample id):
regressions (passed before, fails now), improvements, new and removed samples. Regression gates
(``max_drop``, ``max_regressions``) read their facts from here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ci_evals.aggregate import Aggregator
from ci_evals.bounds import foreign_shape, record_problem, summary_problem
from ci_evals.errors import ConfigError
from ci_evals.gate import GateSpec, metric_value
from ci_evals.reports.summary import iter_results
from ci_evals.stats import summarize


class Baseline:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        summary_path = folder / "summary.json"
        if not summary_path.exists():
            raise ConfigError("baseline folder has no summary.json", file=str(folder))
        try:
            self.summary = json.loads(summary_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ConfigError(f"baseline summary.json is not valid JSON: {exc}", file=str(summary_path)) from None
        if not isinstance(self.summary, dict):
            raise ConfigError("baseline summary.json is not a JSON object", file=str(summary_path))
        problem = summary_problem(self.summary)
        if problem:
            raise ConfigError(f"baseline summary.json: {problem}", file=str(summary_path))
        config = self.summary.get("config")
        if not config:
            raise ConfigError("baseline summary.json has no 'config' block (written by an older version?)",
                              file=str(summary_path))
        with foreign_shape(str(summary_path), "baseline summary.json"):
            self.agg = Aggregator(config, keep_outcomes=True)
        with foreign_shape(str(folder / "results.jsonl"), "baseline results.jsonl"):
            for rec in iter_results(folder / "results.jsonl"):
                problem = record_problem(rec)
                if problem:
                    raise ConfigError(f"baseline results.jsonl: {problem}", file=str(folder / "results.jsonl"))
                self.agg.add(rec)
            self.agg.flush_pending()
        self.current: Aggregator | None = None
        self._diffs: dict = {}  # model -> diff, computed once the current run has finished

    def attach(self, current: Aggregator) -> None:
        """The run being compared; its aggregator must keep per-sample outcomes."""
        self.current = current
        self._diffs = {}

    def _diff(self, model=None) -> dict[str, list]:
        if model not in self._diffs:
            self._diffs[model] = self._compute_diff(model)
        return self._diffs[model]

    def _compute_diff(self, model=None) -> dict[str, list]:
        before = self.agg.outcomes or {}
        now = (self.current.outcomes if self.current else None) or {}
        regressions, improvements = [], []
        for key, metrics in now.items():
            if model is not None and key[0] != model:
                continue
            old = before.get(key)
            if old is None:
                continue
            for name, ok in metrics.items():
                if name in old and old[name] != ok:
                    entry = {"sample_id": key[1], "model": key[0], "metric": name}
                    (improvements if ok else regressions).append(entry)
        new = sorted({k[1] for k in now if k not in before and (model is None or k[0] == model)})
        removed = sorted({k[1] for k in before if k not in now and (model is None or k[0] == model)})
        return {"regressions": regressions, "improvements": improvements, "new": new, "removed": removed}

    def gate_facts(self, gate: GateSpec, model=None) -> dict[str, Any] | None:
        """What a regression gate needs: the baseline's value of its metric and the regression count."""
        name = gate.metric_key
        if name not in self.agg.names:
            return {"value": None, "regressions": 0}
        bmodel = model if model in self.agg.metrics else None
        scores = self.agg.scores(name, bmodel)
        m = self.agg.metrics
        n_passed = sum(m[x][name].passed for x in ([bmodel] if bmodel is not None else list(m)))
        n_err = sum(m[x][name].errors for x in ([bmodel] if bmodel is not None else list(m)))
        agg = summarize(scores, n_passed, n_err)
        diff = self._diff(model)
        return {"value": metric_value(gate, scores, agg) if scores else None,
                "regressions": sum(1 for r in diff["regressions"] if r["metric"] == name)}

    def summary_block(self, summary_metrics: dict[str, Any]) -> dict[str, Any]:
        """The ``baseline`` block of summary.json."""
        base_metrics = self.summary.get("metrics", {})
        metrics = {}
        for name, cur in summary_metrics.items():
            b = base_metrics.get(name)
            metrics[name] = {
                "baseline_mean": b["mean"] if b else None, "mean": cur["mean"],
                "delta_mean": (cur["mean"] - b["mean"]) if b else None,
                "baseline_pass_rate": b["pass_rate"] if b else None, "pass_rate": cur["pass_rate"],
                "delta_pass_rate": (cur["pass_rate"] - b["pass_rate"]) if b else None,
            }
        return {"folder": str(self.folder), "suite": self.summary.get("suite"),
                "finished_at": self.summary.get("finished_at"), "metrics": metrics, **self._diff()}
