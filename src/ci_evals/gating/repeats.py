"""A sample's repeats: its ``num_runs`` runs reduced to one outcome, and how repeats agree.

With ``num_runs > 1`` each sample's runs are reduced to one (score, passed, errored) per metric by
the suite's ``reducer`` (:func:`reduce_runs`) before the aggregator counts it. Whether they are a
sample's runs or its judge's re-asks (``judge_repeats``), :class:`Repeats` measures how much the
repeats disagree: the noise a regression gate weighs and summary.json reports as ``noise``.
"""

from __future__ import annotations

import math
from array import array
from statistics import median
from typing import Literal, TypedDict

from ci_evals.core.rule import passes

Outcome = tuple[float, bool, Literal[False]] | tuple[None, Literal[False], Literal[True]]
"""One sample's (score, passed, errored) on one metric: an errored one has no score, never passes."""


def reduce_runs(reducer: str, runs: list[Outcome], rule: tuple[str, float]) -> Outcome:
    """One (score, passed, errored) from a sample's k runs. A run that errored makes the sample
    errored (no score, failed): an incomplete measurement never passes."""
    if any(r[2] for r in runs):
        return None, False, True
    scores = [r[0] for r in runs if not r[2]]  # every run: none errored
    oks = [r[1] for r in runs]
    errored: Literal[False] = False
    if reducer == "mean":
        s = math.fsum(scores) / len(scores)
    elif reducer == "median":
        s = median(scores)
    elif reducer == "max":
        s = max(scores)
    elif reducer == "pass_at_k":
        return (1.0 if any(oks) else 0.0), any(oks), errored
    elif reducer == "pass_all_k":
        return (1.0 if all(oks) else 0.0), all(oks), errored
    elif reducer == "majority":
        ok = sum(oks) * 2 > len(oks)
        return (1.0 if ok else 0.0), ok, errored
    else:
        raise ValueError(f"unknown reducer {reducer!r}")
    return s, passes(s, *rule), errored


def judge_repeats(info: object) -> tuple[list[float], list[bool]] | None:
    """Each re-ask's score and pass from a grade's ``judge_repeats`` metadata; None unless it holds
    two or more finite scores, each with its pass."""
    if not isinstance(info, dict):
        return None
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
        return [float(x) for x in scores], [bool(b) for b in oks]
    return None


class RepeatsState(TypedDict):
    """:meth:`Repeats.state`: what a worker process hands over (plain JSON data)."""

    source: str
    disagree: int
    variances: list[float]
    repeats: int


class Repeats:
    """How a metric's repeats agree: each sample's ``num_runs`` runs, or its judge's re-asks
    (``judge_repeats``). The run-to-run spread of the metric's mean over the same samples is
    ``sqrt(sum_i s_i^2 / k) / n``, from each sample's variance ``s_i^2`` across its ``k`` repeats
    (Miller 2024, section 3: the judge's share of the variance); order-free, so a live run, a
    recomputation and a merge agree exactly."""

    __slots__ = ("source", "disagree", "variances", "repeats")

    def __init__(self, source: str) -> None:
        self.source = source
        self.disagree = 0
        self.variances = array("d")  # one per sample with repeats
        self.repeats = 0

    @property
    def samples(self) -> int:
        return len(self.variances)

    def add(self, scores: list[float], oks: list[bool]) -> None:
        self.disagree += len(set(oks)) > 1
        self.repeats = max(self.repeats, len(scores))
        mean = math.fsum(scores) / len(scores)
        self.variances.append(math.fsum((x - mean) ** 2 for x in scores) / (len(scores) - 1))

    def state(self) -> RepeatsState:
        return {
            "source": self.source,
            "disagree": self.disagree,
            "variances": self.variances.tolist(),
            "repeats": self.repeats,
        }

    def merge(self, st: RepeatsState) -> None:
        self.disagree += st["disagree"]
        self.variances.extend(st["variances"])
        self.repeats = max(self.repeats, st["repeats"])

    def report(self) -> dict[str, str | int | float | None]:
        """summary.json ``metrics[].noise``: repeats, samples with repeats, how often they disagree,
        the run-to-run spread (SD) of the metric's mean and a sample's mean variance across repeats."""
        n, k = self.samples, self.repeats
        within = math.fsum(self.variances)
        return {
            "source": self.source,
            "repeats": k,
            "samples": n,
            "disagree_rate": self.disagree / n if n else None,
            "run_spread": math.sqrt(within / k) / n if n and k else None,
            "within_variance": within / n if n else None,
        }
