"""Streaming aggregation of result records into per-metric aggregates and gate verdicts.

The same code serves a live run (records fed as samples finish), ``merge`` of shard folders and
recomputation from a ``results.jsonl``: the summary is a function of the records and the suite's
``config`` block only. With ``num_runs > 1`` each sample's runs are reduced to one outcome per
metric (``mean``, ``median``, ``max``, ``pass_at_k``, ``pass_all_k``, ``majority``) before
aggregating; samples whose verdict differs across runs are reported as flaky.

An errored grade has no score: it is counted in ``errors`` and fails its metric's per-sample rule,
and the score aggregates (mean, min, max, percentiles) cover the graded samples only. A sample one
of whose runs errored is errored. Every report and every gate reads the one aggregate computed here.
"""

from __future__ import annotations

import math
from array import array
from collections import defaultdict
from typing import Any

from ci_evals.core.rule import rule_text
from ci_evals.gating.repeats import Repeats, reduce_runs
from ci_evals.gating.stats import summarize

MAX_ERROR_GROUPS = 1000
"""Distinct (category, grader, message) groups kept; later distinct messages are counted together."""
OTHER_MESSAGES = "(other distinct messages)"


class _Metric:
    __slots__ = ("scores", "passed", "errors")

    def __init__(self) -> None:
        self.scores = array("d")
        self.passed = 0
        self.errors = 0

    def add(self, score: float | None, ok: bool, errored: bool) -> None:
        if errored:
            self.errors += 1
        else:
            self.scores.append(score)
            self.passed += ok


class Aggregator:
    """Feed result records with :meth:`add`; get the summary parts with :meth:`finish`.

    Args:
        config: the ``config`` block of summary.json: ``graders`` {name: {label, kind, rule: [op, v]}},
            ``gates`` (GateSpec dumps), ``num_runs``, ``reducer``, and the run's error budget
            ``max_errors`` / ``max_error_rate`` (used when there is no gate).
    """

    def __init__(self, config: dict[str, Any], *, keep_outcomes: bool = False) -> None:
        self.config = config
        # (model, sample id) -> {metric: (score or None when errored, passed)}; kept only when a
        # baseline comparison needs it (the paired tests of ci_evals.gating.noise).
        self.outcomes: dict[tuple, dict[str, tuple[float | None, bool]]] | None = (
            {} if keep_outcomes else None
        )
        self.repeats: dict[
            str, Repeats
        ] = {}  # metric -> how its repeats (runs or judge re-asks) agree
        self.names = list(config["graders"])
        self.rules = {n: tuple(g["rule"]) for n, g in config["graders"].items()}
        self.num_runs = config.get("num_runs", 1)
        self.reducer = config.get("reducer", "mean")
        self.metrics: dict[str | None, dict[str, _Metric]] = defaultdict(
            lambda: {n: _Metric() for n in self.names}
        )
        self.pending: dict[tuple, list[dict]] = {}
        self.flaky: list[dict[str, Any]] = []
        self.records = 0
        self.errors_by_category = {"target": 0, "extraction": 0, "grading": 0}
        self.errored_records = 0
        self.error_groups: dict[tuple[str, str | None, str], int] = {}
        self.usage: dict[str, dict[str, int]] = defaultdict(
            lambda: {"prompt_tokens": 0, "completion_tokens": 0}
        )
        self.cache_hits = 0
        self.retries = 0
        self.cost_usd: float | None = None  # None until some call had a price (suite `pricing`)

    def add(self, rec: dict[str, Any]) -> None:
        self.records += 1
        grades = rec["grades"]
        row_error = rec.get("error")
        if row_error:
            cat = row_error.get("category", "target")
            self.errors_by_category[cat] = self.errors_by_category.get(cat, 0) + 1
            self._group(cat, None, row_error.get("message"))
            self.errored_records += 1
        self._usage("target", rec.get("usage"))
        self.cache_hits += rec.get("cache_hits", 0) or 0
        self.retries += rec.get("retries", 0) or 0
        self._cost((rec.get("target") or {}).get("cost_usd"))
        errored = False
        for name, g in grades.items():
            if not row_error and g.get("error"):
                cat = g.get("error_category", "grading")
                self.errors_by_category[cat] = self.errors_by_category.get(cat, 0) + 1
                self._group(cat, name, g["error"])
                errored = True
            meta = g.get("metadata")
            if meta and "judge_repeats" in meta and not g.get("error"):
                self._judge_repeats(name, meta["judge_repeats"])
            if meta:  # an empty one adds nothing
                self._usage(name, meta.get("usage"))
                self.cache_hits += meta.get("cache_hits", 0) or 0
                self.retries += meta.get("retries", 0) or 0
                self._cost(meta.get("cost_usd"))
        self.errored_records += errored
        model = rec.get("model")
        outcome = {n: _outcome(grades[n]) for n in self.names if n in grades}
        if self.num_runs == 1:
            self._push(model, outcome, str(rec["sample_id"]))
            return
        self._run((model, str(rec["sample_id"])), outcome)

    def _run(self, key: tuple, outcome: dict[str, tuple[float | None, bool, bool]]) -> None:
        """One of a sample's ``num_runs`` runs; the last one reduces them."""
        runs = self.pending.setdefault(key, [])
        runs.append(outcome)
        if len(runs) == self.num_runs:
            del self.pending[key]
            self._reduce(key, runs)

    def _judge_repeats(self, name: str, info: Any) -> None:
        """A grade's ``judge_repeats`` metadata (each re-ask's score and pass): how they agree."""
        if not isinstance(info, dict):
            return
        scores, oks = info.get("scores"), info.get("passed")
        if (
            isinstance(scores, list)
            and isinstance(oks, list)
            and len(scores) == len(oks) >= 2
            and all(
                isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                for x in scores
            )
        ):
            self.repeats.setdefault(name, Repeats("judge_repeats")).add(
                [float(x) for x in scores], [bool(b) for b in oks]
            )

    def _group(self, category: str, grader: str | None, message: str | None, n: int = 1) -> None:
        key = (category, grader, str(message))
        if key not in self.error_groups and len(self.error_groups) >= MAX_ERROR_GROUPS:
            key = (category, grader, OTHER_MESSAGES)
        self.error_groups[key] = self.error_groups.get(key, 0) + n

    def error_summary(self) -> dict[str, Any]:
        """summary.json ``errors``: totals, per category, and the distinct messages most frequent first."""
        groups = sorted(
            self.error_groups.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or "", kv[0][2])
        )
        return {
            "total": sum(self.errors_by_category.values()),
            "samples": self.errored_records,
            "by_category": dict(self.errors_by_category),
            "groups": [
                {"category": c, "grader": g, "message": m, "count": k} for (c, g, m), k in groups
            ],
        }

    def _cost(self, cost: float | None) -> None:
        """Costs are priced per call by the LLM wrapper (ci_evals.llm.cost_usd); here they only add up."""
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost

    def _usage(self, bucket: str, usage: dict | None) -> None:
        if usage:
            u = self.usage[bucket]
            u["prompt_tokens"] += usage.get("prompt_tokens", 0) or 0
            u["completion_tokens"] += usage.get("completion_tokens", 0) or 0

    def _push(self, model, outcome: dict[str, tuple[float, bool, bool]], sid: str) -> None:
        per_metric = self.metrics[model]
        for name, (s, ok, err) in outcome.items():
            m = per_metric[name]
            if err:
                m.errors += 1
            else:
                m.scores.append(s)
                m.passed += ok
        if self.outcomes is not None:
            self.outcomes[(model, sid)] = {
                name: (None if o[2] else o[0], o[1]) for name, o in outcome.items()
            }

    def _reduce(self, key: tuple, runs: list[dict]) -> None:
        model, sid = key
        reduced = {}
        for name in self.names:
            per = [r[name] for r in runs if name in r]
            if not per:
                continue
            if len({ok for _, ok, _ in per}) > 1:
                self.flaky.append(
                    {
                        "sample_id": sid,
                        "model": model,
                        "metric": name,
                        "passes": sum(ok for _, ok, _ in per),
                        "runs": len(per),
                    }
                )
            rep = self.repeats.get(name)
            if (
                len(per) >= 2
                and not any(err for _, _, err in per)
                and (rep is None or rep.source == "num_runs")
            ):
                self.repeats.setdefault(name, Repeats("num_runs")).add(
                    [sc for sc, _, _ in per], [ok for _, ok, _ in per]
                )
            reduced[name] = reduce_runs(self.reducer, per, self.rules[name])
        self._push(model, reduced, sid)

    def flush_pending(self) -> None:
        """Reduce samples whose runs did not all finish (an interrupted or resumed run)."""
        for key in sorted(self.pending, key=lambda k: (str(k[0]), k[1])):
            self._reduce(key, self.pending[key])
        self.pending.clear()

    def scores(self, name: str, model=None) -> list[float]:
        """Sorted graded scores of one metric (all models when ``model`` is None)."""
        models = [model] if model is not None else list(self.metrics)
        return sorted(s for m in models for s in self.metrics[m][name].scores)

    def n_samples(self) -> int:
        """Samples aggregated (after reducing runs); every model sees the same samples."""
        self.flush_pending()
        first = self.names[0]
        return max(
            (len(m[first].scores) + m[first].errors for m in self.metrics.values()), default=0
        )

    def aggregate(self, name: str, model=None) -> dict[str, Any]:
        """One metric's aggregate (all models when ``model`` is None), as summary.json has it."""
        models = [model] if model is not None else list(self.metrics)
        passed = sum(self.metrics[m][name].passed for m in models)
        errors = sum(self.metrics[m][name].errors for m in models)
        return summarize(self.scores(name, model), passed, errors)

    def models(self) -> list[Any]:
        """The model keys seen (None: the run's one target model), in the order summary.json lists them."""
        return sorted(self.metrics, key=lambda m: "" if m is None else str(m))

    def state(self) -> dict[str, Any]:
        """Everything fed so far, as plain JSON data: what a worker process hands to the first
        (ci_evals.run.lanes), which adds it with :meth:`merge`."""
        return {
            "records": self.records,
            "errored_records": self.errored_records,
            "errors_by_category": self.errors_by_category,
            "error_groups": [[*key, n] for key, n in self.error_groups.items()],
            "usage": self.usage,
            "cache_hits": self.cache_hits,
            "retries": self.retries,
            "cost_usd": self.cost_usd,
            "metrics": [
                [model, {n: [m.scores.tolist(), m.passed, m.errors] for n, m in per.items()}]
                for model, per in self.metrics.items()
            ],
            "pending": [
                [model, sid, [{n: list(o) for n, o in run.items()} for run in runs]]
                for (model, sid), runs in self.pending.items()
            ],
            "flaky": self.flaky,
            "outcomes": None
            if self.outcomes is None
            else [[*key, v] for key, v in self.outcomes.items()],
            "repeats": {name: r.state() for name, r in self.repeats.items()},
        }

    def merge(self, state: dict[str, Any]) -> None:
        """Add another aggregator's :meth:`state` (records of other samples), as if fed here."""
        self.records += state["records"]
        self.errored_records += state["errored_records"]
        for cat, n in state["errors_by_category"].items():
            self.errors_by_category[cat] = self.errors_by_category.get(cat, 0) + n
        for cat, grader, message, n in state["error_groups"]:
            self._group(cat, grader, message, n)
        for bucket, usage in state["usage"].items():
            self._usage(bucket, usage)
        self.cache_hits += state["cache_hits"]
        self.retries += state["retries"]
        self._cost(state["cost_usd"])
        for model, per in state["metrics"]:
            mine = self.metrics[model]
            for name, (scores, passed, errors) in per.items():
                mine[name].scores.extend(scores)
                mine[name].passed += passed
                mine[name].errors += errors
        for model, sid, runs in state["pending"]:  # an interrupted worker's unfinished samples
            for run in runs:
                self._run((model, sid), {n: tuple(o) for n, o in run.items()})
        self.flaky.extend(state["flaky"])
        if self.outcomes is not None and state["outcomes"] is not None:
            for model, sid, value in state["outcomes"]:
                self.outcomes[(model, sid)] = {n: tuple(o) for n, o in value.items()}
        for name, rstate in (state.get("repeats") or {}).items():
            self.repeats.setdefault(name, Repeats(rstate["source"])).merge(rstate)

    def finish(self) -> dict[str, Any]:
        """Aggregates and counts: every metric's aggregate (and each model's, with several).

        Gates are not evaluated here: :func:`ci_evals.gating.summary.evaluate_gates` compares these
        aggregates with the suite's gates, reading each metric's scores through :meth:`scores`.
        """
        self.flush_pending()
        models = self.models()
        confidence = 0.95

        def block(metric_map: dict[str, _Metric]) -> dict[str, Any]:
            out = {}
            for name in self.names:
                m = metric_map[name]
                info = self.config["graders"][name]
                agg = summarize(sorted(m.scores), m.passed, m.errors, confidence=confidence)
                rule = rule_text(*self.rules[name])
                out[name] = {
                    "label": info.get("label", name),
                    "kind": info.get("kind"),
                    **agg,
                    "rule": rule,
                    "pass_rule": rule,
                }
                if name in self.repeats and self.repeats[name].samples:
                    out[name]["noise"] = self.repeats[name].report()
            return out

        combined: dict[str, _Metric] = {n: _Metric() for n in self.names}
        for model in models:
            for name in self.names:
                src = self.metrics[model][name]
                dst = combined[name]
                dst.scores.extend(src.scores)
                dst.passed += src.passed
                dst.errors += src.errors
        metrics = block(combined)
        out: dict[str, Any] = {"metrics": metrics}
        if len(models) > 1 or (models and models[0] is not None):
            out["models"] = {
                str(model): {"metrics": block(self.metrics[model])} for model in models
            }
        out["n_samples"] = self.n_samples()
        out["errors"] = self.error_summary()
        out["flaky"] = self.flaky
        out["records"] = self.records
        out["cache"] = {"hits": self.cache_hits}
        out["retries"] = self.retries
        return out


def _outcome(grade: dict[str, Any]) -> tuple[float | None, bool, bool]:
    """(score, passed, errored) of one grade; an errored grade has no score and never passes."""
    if grade.get("error"):
        return None, False, True
    return float(grade["score"]), bool(grade["passed"]), False
