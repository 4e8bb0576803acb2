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

from array import array
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, TypedDict

from ci_evals.core.rule import passes, rule_text
from ci_evals.gating.error_tally import ErrorTally
from ci_evals.gating.measured import Measured, MeasuredState
from ci_evals.gating.repeats import Outcome, Repeats, RepeatsState, judge_repeats, reduce_runs
from ci_evals.gating.stats import summarize
from ci_evals.results.measures import BUILTIN_KIND, measure_some
from ci_evals.results.records import Grade, MetricEntry, ResultRecord, Summary

Model = str | None
"""A model key: the model a record names (a multi-model run), or None (the run's one target)."""
SampleKey = tuple[Model, str]
"""(model, sample id): one sample of one model, as runs and baselines match them."""


class AggregatorState(TypedDict):
    """:meth:`Aggregator.state`: plain JSON data (arrays where the aggregator holds tuples)."""

    records: int
    errored_records: int
    errors_by_category: dict[str, int]
    error_groups: list[list[Any]]  # [category, grader or null, message, count]
    usage: dict[str, dict[str, int]]
    cache_hits: int
    retries: int
    cost_usd: float | None
    metrics: list[list[Any]]  # [model, {metric: [scores, passed, errors]}]
    pending: list[list[Any]]  # [model, sample id, [{metric: [score, passed, errored]}, ...]]
    flaky: list[dict[str, Any]]
    outcomes: list[list[Any]] | None  # [model, sample id, {metric: [score, passed]}]
    repeats: dict[str, RepeatsState]
    measured: MeasuredState


class _Metric:
    __slots__ = ("scores", "passed", "errors")

    def __init__(self) -> None:
        self.scores = array("d")
        self.passed = 0
        self.errors = 0

    def add(self, outcome: Outcome) -> None:
        if outcome[2]:
            self.errors += 1
        else:
            self.scores.append(outcome[0])
            self.passed += outcome[1]


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
        self.outcomes: dict[SampleKey, dict[str, tuple[float | None, bool]]] | None = (
            {} if keep_outcomes else None
        )
        self.repeats: dict[
            str, Repeats
        ] = {}  # metric -> how its repeats (runs or judge re-asks) agree
        self.names: list[str] = list(config["graders"])
        self.builtins: list[str] = [  # built-in metrics a gate reads (ci_evals.results.measures)
            n for n, g in config["graders"].items() if g.get("kind") == BUILTIN_KIND
        ]
        self.measured = Measured(keep_samples=keep_outcomes)
        self.rules: dict[str, tuple[str, float]] = {
            n: tuple(g["rule"]) for n, g in config["graders"].items()
        }
        self.num_runs: int = config.get("num_runs", 1)
        self.reducer: str = config.get("reducer", "mean")
        self.metrics: dict[Model, dict[str, _Metric]] = defaultdict(
            lambda: {n: _Metric() for n in self.names}
        )
        self.pending: dict[SampleKey, list[dict[str, Outcome]]] = {}
        self.flaky: list[dict[str, Any]] = []
        self.records = 0
        self.errors = ErrorTally()  # every error, per category and message
        self.usage: dict[str, dict[str, int]] = defaultdict(
            lambda: {"prompt_tokens": 0, "completion_tokens": 0}
        )
        self.cache_hits = 0
        self.retries = 0
        self.cost_usd: float | None = None  # None until some call had a price (suite `pricing`)

    def add(self, rec: ResultRecord) -> None:
        self.records += 1
        grades = rec["grades"]
        row_error = rec.get("error")
        if row_error:
            self.errors.add(row_error.get("category", "target"), None, row_error.get("message"))
            self.errors.samples += 1
        self._usage("target", rec.get("usage"))
        self.cache_hits += rec.get("cache_hits", 0) or 0
        self.retries += rec.get("retries", 0) or 0
        self._cost((rec.get("target") or {}).get("cost_usd"))
        errored = False
        for name, g in grades.items():
            if not row_error and g.get("error"):
                cat = g.get("error_category") or "grading"  # null: as the reports count it
                self.errors.add(cat, name, g["error"])
                errored = True
            meta = g.get("metadata")
            if meta and "judge_repeats" in meta and not g.get("error"):
                asks = judge_repeats(meta["judge_repeats"])
                if asks is not None:
                    self.repeats.setdefault(name, Repeats("judge_repeats")).add(*asks)
            if meta:  # an empty one adds nothing
                self._usage(name, meta.get("usage"))
                self.cache_hits += meta.get("cache_hits", 0) or 0
                self.retries += meta.get("retries", 0) or 0
                self._cost(meta.get("cost_usd"))
        self.errors.samples += errored
        self.measured.add(rec)
        model = rec.get("model")
        outcome = {n: _outcome(grades[n]) for n in self.names if n in grades}
        readings = measure_some(rec, self.builtins) if self.builtins else ()
        for name, reading in zip(self.builtins, readings, strict=True):
            if reading.errored:
                outcome[name] = (None, False, True)
            elif reading.value is not None:
                outcome[name] = (reading.value, passes(reading.value, *self.rules[name]), False)
        if self.num_runs == 1:
            self._push(model, outcome, str(rec["sample_id"]))
            return
        self._run((model, str(rec["sample_id"])), outcome)

    def _run(self, key: SampleKey, outcome: dict[str, Outcome]) -> None:
        """One of a sample's ``num_runs`` runs; the last one reduces them."""
        runs = self.pending.setdefault(key, [])
        runs.append(outcome)
        if len(runs) == self.num_runs:
            del self.pending[key]
            self._reduce(key, runs)

    def _cost(self, cost: float | None) -> None:
        """Costs are priced per call by the LLM wrapper (ci_evals.llm.cost_usd); here they only add up."""
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost

    def _usage(self, bucket: str, usage: Mapping[str, int] | None) -> None:
        if usage:
            u = self.usage[bucket]
            u["prompt_tokens"] += usage.get("prompt_tokens", 0) or 0
            u["completion_tokens"] += usage.get("completion_tokens", 0) or 0

    def _push(self, model: Model, outcome: dict[str, Outcome], sid: str) -> None:
        per_metric = self.metrics[model]
        for name, o in outcome.items():
            per_metric[name].add(o)
        if self.outcomes is not None:
            self.outcomes[(model, sid)] = {
                name: (None if o[2] else o[0], o[1]) for name, o in outcome.items()
            }

    def _reduce(self, key: SampleKey, runs: list[dict[str, Outcome]]) -> None:
        model, sid = key
        reduced: dict[str, Outcome] = {}
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
                    [o[0] for o in per if not o[2]], [ok for _, ok, _ in per]
                )
            reduced[name] = reduce_runs(self.reducer, per, self.rules[name])
        self._push(model, reduced, sid)

    def flush_pending(self) -> None:
        """Reduce samples whose runs did not all finish (an interrupted or resumed run)."""
        for key in sorted(self.pending, key=lambda k: (str(k[0]), k[1])):
            self._reduce(key, self.pending[key])
        self.pending.clear()

    def scores(self, name: str, model: Model = None) -> list[float]:
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

    def aggregate(self, name: str, model: Model = None) -> MetricEntry:
        """One metric's aggregate (all models when ``model`` is None), as summary.json has it."""
        models = [model] if model is not None else list(self.metrics)
        passed = sum(self.metrics[m][name].passed for m in models)
        errors = sum(self.metrics[m][name].errors for m in models)
        return summarize(self.scores(name, model), passed, errors)

    def models(self) -> list[Model]:
        """The model keys seen (None: the run's one target model), in the order summary.json lists them."""
        return sorted(self.metrics, key=lambda m: "" if m is None else str(m))

    def state(self) -> AggregatorState:
        """Everything fed so far, as plain JSON data: what a worker process hands to the first
        (ci_evals.run.lanes), which adds it with :meth:`merge`."""
        return {
            "records": self.records,
            "errored_records": self.errors.samples,
            "errors_by_category": self.errors.by_category,
            "error_groups": [[*key, n] for key, n in self.errors.groups.items()],
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
            "measured": self.measured.state(),
        }

    def merge(self, state: AggregatorState) -> None:
        """Add another aggregator's :meth:`state` (records of other samples), as if fed here."""
        self.records += state["records"]
        self.errors.merge(
            state["errored_records"], state["errors_by_category"], state["error_groups"]
        )
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
        self.measured.merge(state["measured"])

    def finish(self) -> Summary:
        """Aggregates and counts: every metric's aggregate (and each model's, with several).

        Gates are not evaluated here: :func:`ci_evals.gating.summary.evaluate_gates` compares these
        aggregates with the suite's gates, reading each metric's scores through :meth:`scores`.
        """
        self.flush_pending()
        models = self.models()
        confidence = 0.95

        def block(metric_map: dict[str, _Metric], model: Model = None) -> dict[str, MetricEntry]:
            out: dict[str, MetricEntry] = {}
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
                if name in self.builtins:  # every line's value, each run's: what the run spent
                    out[name]["sum"] = self.measured.total(name, model) if m.scores else None
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
        out: Summary = {"metrics": metrics}
        if len(models) > 1 or (models and models[0] is not None):
            out["models"] = {
                str(model): {"metrics": block(self.metrics[model], model)} for model in models
            }
        out["n_samples"] = self.n_samples()
        out["errors"] = self.errors.summary()
        out["flaky"] = self.flaky
        out["records"] = self.records
        out["cache"] = {"hits": self.cache_hits}
        out["retries"] = self.retries
        out["cost_speed"] = self.measured.block(self.cost_usd, self.retries, self.cache_hits)
        return out


def _outcome(grade: Grade) -> Outcome:
    """(score, passed, errored) of one grade; an errored grade has no score and never passes."""
    if grade.get("error"):
        return None, False, True
    score = grade["score"]
    if score is None:  # the shape checks refuse it (float(None) raised the same TypeError)
        raise TypeError("a grade without an error has a null score")
    return float(score), bool(grade["passed"]), False
