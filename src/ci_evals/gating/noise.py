"""Is a change more than noise? The tests a regression gate decides with, a gate's stability, and
the evidence a decision needs.

A judge that passes the same answer 90 % of the time flips a dozen of 200 samples each way on
every rerun, so counting regressions, or comparing two means, cries wolf on pull requests that
changed nothing. Following Miller, "Adding Error Bars to Evals" (arXiv 2411.00640):

* **Paired differences** (section 4). A run and its baseline grade the same samples, so the change
  is the mean of per-sample differences ``d_i = now_i - before_i`` (a sample's repeats are averaged
  first: the sample is the cluster, section 2.3), with standard error ``sd(d) / sqrt(n)``: the
  variance the samples share cancels. :func:`paired_change` gives the change, its two-sided
  interval at the gate's confidence and the one-sided p-value of a paired t-test (H0: no drop).
* **Regressions against improvements.** With pass/fail outcomes the samples that changed are
  McNemar's discordant pairs: under no change, regressions among ``regressions + improvements`` are
  Binomial(n, 1/2). :func:`mcnemar_p` is the exact one-sided p-value.
* **Stability** (how often a rerun would give the same status). A gate compares a statistic with
  a cut. Neither this run's nor a rerun's statistic is the true value: their difference is about
  normal with ``se = sqrt(se_this^2 + se_rerun^2)`` (the predictive spread: a flat prior on the
  truth), so a rerun lands on the same side with probability ``Phi(|statistic - cut| / se)``
  (:func:`stability`). At the cut itself a plug-in
  estimate averages about 0.70 over reruns where 0.5 is true: read figures near the cut as "unstable".
* **Power** (section 5): samples that tell a change of ``effect`` at one-sided level ``alpha`` with
  power 0.8 from differences of spread ``sd``: ``n = ((z_{1-alpha} + z_{0.8}) sd / effect)^2``:
  :func:`samples_needed`.

Pure arithmetic on floats (no numpy, no scipy: the tests check every formula against scipy). The
Student t and binomial tails come from the regularized incomplete beta function (Numerical
Recipes, 3rd ed., 6.4: Lentz's continued fraction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

POWER = 0.8
"""The power a suggested sample size aims at (a drop of the stated size is caught 4 times in 5)."""
_N = NormalDist()


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` (scipy.special.betainc)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (scipy.stats.t.sf)."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    t2 = t * t
    # I_x(df/2, 1/2) with x = df/(df + t^2); near x = 1 through its complement, computed exactly
    tail = (
        0.5 * (1.0 - betainc(0.5, df / 2.0, t2 / (df + t2)))
        if t2 < df
        else 0.5 * betainc(df / 2.0, 0.5, df / (df + t2))
    )
    return tail if t >= 0 else 1.0 - tail


def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t (scipy.stats.t.ppf), by bisection on :func:`t_sf`."""
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if 1.0 - t_sf(mid, df) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2


def binom_sf(k: int, n: int, p: float = 0.5) -> float:
    """P(X >= k) for X ~ Binomial(n, p) (scipy.stats.binom.sf(k - 1, n, p))."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return betainc(k, n - k + 1, p)


def mcnemar_p(regressions: int, improvements: int) -> float:
    """McNemar's exact one-sided p-value: the chance of at least ``regressions`` of the discordant
    pairs going down when a change is as likely either way (1.0 when no sample changed)."""
    return binom_sf(regressions, regressions + improvements, 0.5)


@dataclass(frozen=True)
class Change:
    """A paired comparison of a run with its baseline on one metric."""

    n: int
    """Samples graded in both runs."""
    change: float
    """Mean of ``now - before`` (negative: a drop)."""
    sd: float
    """Standard deviation of the per-sample differences."""
    se: float
    interval: tuple[float, float]
    """Two-sided interval of the change at the confidence asked."""
    p_drop: float
    """One-sided p-value of the paired t-test, H0: no drop."""


def paired_change(diffs: list[float], confidence: float) -> Change | None:
    """The paired t-test of per-sample differences ``now - before`` (scipy.stats.ttest_rel); None
    for fewer than two pairs."""
    n = len(diffs)
    if n < 2:
        return None
    mean = math.fsum(diffs) / n
    var = math.fsum((d - mean) ** 2 for d in diffs) / (n - 1)
    sd = math.sqrt(var)
    se = sd / math.sqrt(n)
    half = t_ppf(1.0 - (1.0 - confidence) / 2.0, n - 1) * se
    if se == 0.0:
        p = 0.0 if mean < 0 else 1.0
    else:
        p = t_sf(-mean / se, n - 1)
    return Change(n=n, change=mean, sd=sd, se=se, interval=(mean - half, mean + half), p_drop=p)


def stability(statistic: float, cut: float, se: float) -> float:
    """How often a rerun would put ``statistic`` on the same side of ``cut``, when reruns spread
    normally around it with standard error ``se`` (1.0 when nothing varies)."""
    if se <= 0.0 or not math.isfinite(se):
        return 1.0 if statistic != cut or se == 0.0 else 0.5
    return _N.cdf(abs(statistic - cut) / se)


def samples_needed(effect: float, sd: float, confidence: float, power: float = POWER) -> int | None:
    """Samples (pairs) that tell a change of ``effect`` at one-sided ``confidence`` with ``power``,
    when per-sample differences spread with ``sd``; None when it cannot be said (no spread or effect)."""
    if effect <= 0.0 or sd <= 0.0:
        return None
    z = _N.inv_cdf(confidence) + _N.inv_cdf(power)
    return math.ceil((z * sd / effect) ** 2)


def z_one_sided(confidence: float) -> float:
    return _N.inv_cdf(confidence)
