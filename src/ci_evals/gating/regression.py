"""What a gate's checks decide on: regression checks against a baseline, and every gate's stability.

:func:`regression_checks` turns a regression gate's baseline facts (:meth:`Baseline.gate_facts`)
into its checks. On a deterministic grader they are exact, as written: ``max_drop`` compares the
two means, ``max_regressions: 0`` fails on one regressed sample. On a noisy grader (an LLM or
agent judge, or repeats that disagree) each check needs both the limit passed *and* evidence at
the gate's confidence (0.95 unless the gate sets ``confidence``), from :mod:`ci_evals.gating.noise`:

* ``max_drop``: the paired change over the samples both runs graded; it fails when the drop is
  past ``max_drop`` and a one-sided paired t-test says it is not noise (p < 1 - confidence).
* ``max_regressions``: regressions against improvements (McNemar's exact test); it fails when
  regressions exceed improvements by more than ``max_regressions`` and the excess is not noise.

Past the limit but within noise, the check is ``undecided``: the gate passes (a pull request that
changed nothing stays green) and every report flags it with the samples that would decide it.

:func:`absolute_stability` and the stability each check returns say how often a rerun would give
the same status (:func:`ci_evals.gating.noise.stability`, from the run's own spread); for a
regression check on a noisy grader, whether it fails or not (``passed`` and ``undecided`` both
pass: an ``undecided`` gate is flagged whatever its figure).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from typing import Protocol, TypedDict

from ci_evals.core.rule import OPS
from ci_evals.gating.noise import (
    Change,
    binom_sf,
    mcnemar_p,
    paired_change,
    samples_needed,
    stability,
    z_one_sided,
)
from ci_evals.gating.stats import percentile, z_value
from ci_evals.results.records import GateResult, MetricEntry, RegressionTest

DEFAULT_CONFIDENCE = 0.95
QUANTILE = {"min": 0.0, "max": 100.0, "median": 50.0, "p50": 50.0, "p95": 95.0, "p99": 99.0}
SQRT2 = math.sqrt(2.0)


def _points(x: float) -> str:
    return f"{x * 100:.3g}-point"


def _needed(effect: float, sd: float, confidence: float, what: str) -> str:
    n = samples_needed(effect, sd, confidence)
    return f"; about {n:,} samples would tell {what} at {confidence:.0%}" if n else ""


class GateFacts(TypedDict, total=False):
    """What a regression gate knows of its baseline (:meth:`Baseline.gate_facts`): the baseline's
    value of the metric, the samples that regressed and improved, the paired differences and
    whether the metric is noisy; or only ``missing``, why the baseline cannot say."""

    missing: str
    value: float
    regressions: int
    improvements: int
    diffs: list[float]
    noisy: bool


class RegressionLimits(Protocol):
    """What the checks read of a gate (:class:`ci_evals.gating.gates.GateSpec`)."""

    @property
    def confidence(self) -> float | None: ...
    @property
    def max_drop(self) -> float | None: ...
    @property
    def max_regressions(self) -> int | None: ...
    @property
    def max_increase(self) -> float | None: ...


def regression_checks(
    gate: RegressionLimits, actual: float, facts: GateFacts, out: GateResult
) -> Iterator[tuple[str, str, float]]:
    """(check, reason, stability) for the gate's ``max_drop`` and ``max_regressions``; records what
    each test found in ``out`` (``baseline_value``, ``drop``, ``regressions``, ``improvements``,
    ``tests``)."""
    confidence = gate.confidence or DEFAULT_CONFIDENCE
    noisy = bool(facts.get("noisy"))
    diffs: Sequence[float] = facts.get("diffs") or []
    out["noisy"] = noisy
    tests = out.setdefault("tests", [])
    if gate.max_drop is not None:
        before = facts["value"]
        drop = before - actual
        out["baseline_value"], out["drop"], out["max_drop"] = before, drop, gate.max_drop
        yield _drop_check(gate.max_drop, drop, before, diffs, noisy, confidence, tests)
    if gate.max_regressions is not None:
        reg, imp = int(facts.get("regressions", 0)), int(facts.get("improvements", 0))
        out["regressions"], out["improvements"], out["max_regressions"] = (
            reg,
            imp,
            gate.max_regressions,
        )
        yield _regressions_check(
            gate.max_regressions, reg, imp, len(diffs), noisy, confidence, tests
        )
    if gate.max_increase is not None:
        before = facts["value"]
        increase = _relative(actual, before)
        out["baseline_value"], out["max_increase"] = before, gate.max_increase
        out["increase"] = increase if math.isfinite(increase) else None
        yield _increase_check(gate.max_increase, actual, before, diffs, noisy, confidence, tests)


def _relative(now: float, before: float) -> float:
    """``(now - before) / before``; from 0, any increase is infinite (and none is 0)."""
    if before > 0:
        return (now - before) / before
    return math.inf if now > before else 0.0


def _decide(past: bool, change: Change, alpha: float) -> str:
    """A change past its limit fails when the paired test says more than noise explains it (one-
    sided p below ``alpha``), else is ``undecided``; within the limit it passes."""
    return "failed" if past and change.p_drop < alpha else ("undecided" if past else "passed")


def _paired_test(
    check: str, change: Change, shown: float, interval: list[float | None], confidence: float
) -> RegressionTest:
    """The paired t-test's entry in a gate's ``tests`` (``max_drop``'s and ``max_increase``'s:
    ``shown`` and ``interval`` in the direction the check reads)."""
    return {
        "check": check,
        "test": "paired t-test (one-sided)",
        "n": change.n,
        "change": shown,
        "interval": interval,
        "p_value": change.p_drop,
        "confidence": confidence,
    }


def _increase_check(
    limit: float,
    actual: float,
    before: float,
    diffs: Sequence[float],
    noisy: bool,
    confidence: float,
    tests: list[RegressionTest],
) -> tuple[str, str, float]:
    """``max_increase`` on a lower-is-better metric (latency, tokens, cost_usd...): the gate's
    aggregate grew by more than ``limit`` (relative) from the baseline's. Where the per-sample
    values vary (timings always do), it fails only when the paired per-sample increase is also
    more than noise explains (one-sided paired t-test, as ``max_drop``); past the limit within
    noise, ``undecided``."""
    increase = _relative(actual, before)
    past = increase > limit + 1e-12
    shown = f"{increase:+.1%}" if math.isfinite(increase) else "from 0"
    head = f"{actual:.4g} against baseline {before:.4g} ({shown}, max_increase {limit:g})"
    change = paired_change([-d for d in diffs], confidence)  # a drop of the negated: an increase
    if not noisy or change is None:
        tests.append({"check": "max_increase", "test": "exact", "change": actual - before})
        return ("failed" if past else "passed"), head, 1.0
    alpha = 1.0 - confidence
    lo, hi = -change.interval[1], -change.interval[0]
    check = _decide(past, change, alpha)
    tests.append(_paired_test("max_increase", change, -change.change, [lo, hi], confidence))
    evidence = (
        f"paired change {-change.change:+.4g}, {confidence:.0%} interval [{lo:+.4g}, {hi:+.4g}] "
        f"over {change.n} samples in both runs (paired t-test, one-sided p={change.p_drop:.2g})"
    )
    if check == "failed":
        tail = "an increase past max_increase, more than noise explains"
    elif check == "undecided":
        tail = f"an increase past max_increase but within noise (p >= {alpha:.2g})"
    else:
        tail = "within max_increase"
    cut = before * (1 + limit) if before > 0 else 0.0
    stab = stability(actual, cut, change.se) if change.se else 1.0
    return check, f"{head}; {evidence}: {tail}", stab


def _drop_check(
    limit: float,
    drop: float,
    before: float,
    diffs: Sequence[float],
    noisy: bool,
    confidence: float,
    tests: list[RegressionTest],
) -> tuple[str, str, float]:
    change = paired_change(list(diffs), confidence)
    if not noisy or change is None:
        check = "passed" if drop <= limit + 1e-12 else "failed"
        tests.append({"check": "max_drop", "test": "exact (deterministic grader)", "change": -drop})
        stab = (
            stability(drop, limit, change.se) if change is not None else 1.0
        )  # se of a difference: predictive
        return check, f"drop {drop:.4f} from baseline {before:.4f} (max_drop {limit:g})", stab
    pdrop = -change.change
    lo, hi = change.interval
    alpha = 1.0 - confidence
    past = pdrop > limit + 1e-12
    check = _decide(past, change, alpha)
    tests.append(_paired_test("max_drop", change, change.change, [lo, hi], confidence))
    head = (
        f"paired change {change.change:+.4f}, {confidence:.0%} interval [{lo:+.4f}, {hi:+.4f}] over "
        f"{change.n} samples graded in both runs (paired t-test, one-sided p={change.p_drop:.2g})"
    )
    if check == "failed":
        tail = f"a drop past max_drop {limit:g}, more than noise explains"
    elif check == "undecided":
        effect = limit if limit > 0 else pdrop
        tail = f"a drop past max_drop {limit:g} but within noise (p >= {alpha:.2g})" + _needed(
            effect, change.sd, confidence, f"a {_points(effect)} drop"
        )
    else:
        tail = f"within max_drop {limit:g}"
    cut = max(limit, z_one_sided(confidence) * change.se)  # a drop fails past both
    # whether a rerun fails too (or not: passed and undecided both pass); a rerun varies this run
    # (se / sqrt 2) and the truth is as uncertain: the predictive se is change.se
    stab = stability(pdrop, cut, change.se)
    if stab < 0.9 and check != "undecided" and limit > 0:
        tail += _needed(limit, change.sd, confidence, f"a {_points(limit)} drop")
    return check, f"{head}: {tail}", stab


def _regressions_check(
    limit: int,
    reg: int,
    imp: int,
    pairs: int,
    noisy: bool,
    confidence: float,
    tests: list[RegressionTest],
) -> tuple[str, str, float]:
    plural = "s" if reg != 1 else ""
    if not noisy:
        check = "passed" if reg <= limit else "failed"
        tests.append(
            {"check": "max_regressions", "test": "exact (deterministic grader)", "regressions": reg}
        )
        # resampling the samples: regressions ~ Binomial(pairs, reg / pairs)
        p_pass = 1.0 - binom_sf(limit + 1, pairs, reg / pairs) if pairs and reg else 1.0
        return (
            check,
            f"{reg} regression{plural}, max {limit}",
            p_pass if check == "passed" else 1.0 - p_pass,
        )
    p = mcnemar_p(reg, imp)
    alpha = 1.0 - confidence
    net = reg - imp
    if net > limit and p < alpha:
        check = "failed"
    elif net > limit:
        check = "undecided"
    else:  # regressions past the limit matched by improvements: the judge flipped samples both ways
        check = "passed"
    tests.append(
        {
            "check": "max_regressions",
            "test": "McNemar exact test (one-sided)",
            "regressions": reg,
            "improvements": imp,
            "p_value": p,
            "confidence": confidence,
        }
    )
    head = f"{reg} regression{plural} against {imp} improvement{'s' if imp != 1 else ''} (McNemar, one-sided p={p:.2g})"
    if check == "failed":
        tail = f"{net} more regressions than improvements, past max {limit} and more than noise explains"
    elif check == "undecided":
        rate = net / pairs if pairs else 0.0
        tail = (
            f"{net} more regressions than improvements, past max {limit} but within what noise flips "
            f"each way (p >= {alpha:.2g})"
            + _needed(
                rate,
                math.sqrt((reg + imp) / pairs) if pairs else 0.0,
                confidence,
                f"whether an excess of {rate:.1%} of samples (here {net} of {pairs}) is real",
            )
        )
    else:
        tail = f"the excess of regressions over improvements ({max(net, 0)}) within max {limit}"
    spread = math.sqrt(reg + imp)  # net = reg - imp varies about as much as the discordant count
    cut = max(limit + 0.5, z_one_sided(confidence) * spread)
    # spread is the both-runs-vary se of net (McNemar's), as change.se is for a drop: the predictive
    # se of a rerun against this baseline (this run's and the rerun's spread, each half of it)
    return check, f"{head}: {tail}", stability(net, cut, spread) if spread else 1.0


def absolute_stability(
    metric: str,
    op: str,
    value: float,
    agg: MetricEntry,
    actual: float,
    scores: Sequence[float],
    interval: tuple[float, float] | None = None,
) -> float:
    """How often a rerun would give an absolute gate (``metric op value``) the same status: the
    statistic spreads with its standard error (the mean's from its 95 % interval, the pass rate's
    binomial); a percentile's rerun by resampling is a binomial count of the scores below the cut.
    ``interval``: the one a ``confidence`` gate decided with (its bounds must stay where they are)."""
    if op == "eq" or _one_answer(op, value):
        return 1.0
    if metric in QUANTILE:
        return _quantile_stability(op, value, QUANTILE[metric], scores)
    se = SQRT2 * metric_se(
        metric, agg, actual
    )  # predictive: this run and a rerun both stray from the truth
    if interval is None:
        return stability(actual, value, se)
    lo, hi = interval
    below_lo, above_hi = stability(lo, value, se), stability(hi, value, se)
    ok_lo, ok_hi = OPS[op](lo, value), OPS[op](hi, value)
    if ok_lo == ok_hi:  # passed or failed: the bound nearer the value decides
        return min(below_lo, above_hi)
    return max(0.0, below_lo + above_hi - 1.0)  # inconclusive: both bounds stay where they are


def _one_answer(op: str, value: float) -> bool:
    """Whether ``statistic op value`` is decided whatever the run: every score lies in [0, 1]
    (graders clamp or error), and so does every mean, pass rate and percentile of them, which no
    rerun can move past a cut outside that range (``avg_score gte 0`` always holds; the normal
    spread of a mean near 0 would say it fails in some reruns). The ops are monotone: both ends
    agreeing settles every value between."""
    return bool(OPS[op](0.0, value)) == bool(OPS[op](1.0, value))


def metric_se(metric: str, agg: MetricEntry, actual: float) -> float:
    """The standard error of a mean (from its 95 % interval) or of a pass rate (binomial); 0 for a
    percentile, whose stability is a resampled count (:func:`absolute_stability`)."""
    if metric == "accuracy":
        n = agg["n"]
        return math.sqrt(actual * (1 - actual) / n) if n else 0.0
    if metric in QUANTILE:
        return 0.0
    ci = agg.get("ci_mean")
    if not ci or ci[0] is None or ci[1] is None:
        return 0.0
    return (ci[1] - ci[0]) / (2 * z_value(0.95))


def _quantile_stability(op: str, value: float, q: float, scores: Sequence[float]) -> float:
    n = len(scores)
    if not n:
        return 1.0
    passed = OPS[op](percentile(scores, q), value)
    rank = q / 100.0 * (n - 1)
    if op in ("gt", "gte"):  # passes while few enough scores lie below the cut
        bad = bisect_left(scores, value) if op == "gte" else bisect_right(scores, value)
        allowed = rank
    else:
        bad = n - (bisect_right(scores, value) if op == "lte" else bisect_left(scores, value))
        allowed = (n - 1) - rank
    f = bad / n
    k = math.floor(allowed)  # passes while the rerun's count of bad scores is at most k
    p_pass = 1.0 - binom_sf(k + 1, n, f) if 0 < f < 1 else (1.0 if bad <= k else 0.0)
    return p_pass if passed else 1.0 - p_pass


def errors_stability(
    errors: int, n: int, max_errors: int | None, max_error_rate: float | None
) -> float:
    """How often a rerun would break (or keep) the error budget the same way, errors ~ Binomial."""
    if not n:
        return 1.0
    if max_error_rate is None:
        limit = max_errors if max_errors is not None else 0
    else:
        by_rate = math.floor(max_error_rate * n + 1e-9)
        limit = by_rate if max_errors is None else min(max_errors, by_rate)
    f = errors / n
    p_within = 1.0 - binom_sf(limit + 1, n, f) if 0 < f < 1 else (1.0 if errors <= limit else 0.0)
    return 1.0 - p_within if errors > limit else p_within
