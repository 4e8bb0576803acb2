"""Aggregates over per-sample scores: mean, pass rate, percentiles and 95 % intervals.

Intervals: a percentile bootstrap over samples for the mean (seeded, so reports are reproducible)
and the Wilson score interval for pass rates. Above ``BOOTSTRAP_MAX_N`` samples the bootstrap is
replaced by the normal approximation ``mean ± z·s/√n``, which it converges to, to stay fast.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from statistics import NormalDist

from ci_evals.results.records import MetricEntry

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_MAX_N = 200
BOOTSTRAP_SEED = 12345


def z_value(confidence: float) -> float:
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval for a proportion; None when n == 0."""
    if n == 0:
        return None
    z = z_value(confidence)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap_mean(
    values: Sequence[float],
    confidence: float = 0.95,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the mean; None when there are no values."""
    n = len(values)
    if n == 0:
        return None
    if n > BOOTSTRAP_MAX_N:
        mean = math.fsum(values) / n
        var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
        half = z_value(confidence) * math.sqrt(var / n)
        return (max(0.0, mean - half), min(1.0, mean + half))
    rng = random.Random(seed)
    means = sorted(math.fsum(rng.choices(values, k=n)) / n for _ in range(resamples))
    alpha = (1.0 - confidence) / 2.0
    return (percentile(means, alpha * 100), percentile(means, (1 - alpha) * 100))


def summarize(
    graded: Sequence[float], passed: int, errors: int, *, confidence: float = 0.95
) -> MetricEntry:
    """The per-metric aggregate of summary.json, the metric table and every gate.

    ``graded`` holds the scores of the samples that were graded, sorted; errored samples have no
    score. Score aggregates cover the graded samples only (null when none was graded); the pass
    rate is over every sample, errored ones counting as failed. Both intervals are always given:
    the bootstrap (or normal) interval of the mean and the Wilson interval of the pass rate.
    """
    k = len(graded)
    n = k + errors
    mean = math.fsum(graded) / k if k else None
    ci_mean = bootstrap_mean(graded, confidence) if k else None
    ci_pass_rate = wilson(passed, n, confidence) if n else None
    return {
        "n": n,
        "graded": k,
        "errors": errors,
        "mean": mean,
        "passed": passed,
        "pass_rate": passed / n if n else None,
        "min": graded[0] if k else None,
        "max": graded[-1] if k else None,
        "median": percentile(graded, 50) if k else None,
        "p50": percentile(graded, 50) if k else None,
        "p95": percentile(graded, 95) if k else None,
        "p99": percentile(graded, 99) if k else None,
        "ci_mean": list(ci_mean) if ci_mean is not None else None,
        "ci_pass_rate": list(ci_pass_rate) if ci_pass_rate is not None else None,
        "ci_method": {
            "mean": "bootstrap" if k <= BOOTSTRAP_MAX_N else "normal",
            "pass_rate": "wilson",
        },
    }
