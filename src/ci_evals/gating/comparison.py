"""A run compared with its baseline, read once: what every report shows of the comparison.

:class:`~ci_evals.gating.baseline.Baseline` reads the baseline folder (summary.json and
results.jsonl) once and, the run finished, hands the reports one :class:`Comparison`:

* ``block``: summary.json's ``baseline`` block (per-metric deltas, the samples that regressed,
  improved, are new or were removed), as :func:`~ci_evals.gating.summary.summarize` writes it;
* ``regressed``: (model, sample id) -> the metrics that regressed there. One definition, the
  regression gates': after the suite's reducer, the sample passed the metric in the baseline and
  fails it now. A report.html row (one run of a sample) is regressed exactly when its
  (model, sample id) is; summary.md, the PR comment, the console and junit.xml count the same list;
* ``grades``: the baseline's grades per (model, sample id, run), for report.html's side-by-side
  columns: score, passed, and error and rationale cut at :data:`BASELINE_TEXT_CAP` characters
  (:func:`capped`, as report.html cuts every text), empty entries left out.

A baseline that cannot be compared (``block["missing"]`` says why) regresses nothing and shows no
grades. The baseline's lines are held once, as these capped grades.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from typing_extensions import TypedDict

from ci_evals.gating.aggregate import SampleKey
from ci_evals.results.records import BaselineBlock, BaselineMetric, Number, ResultRecord

BASELINE_TEXT_CAP = 1_000
"""Characters of a baseline grade's error and rationale that report.html shows."""

RowKey = tuple[str | None, str, int]
"""(model, sample id, run): what tells result lines apart."""


class CutText(TypedDict):
    """A text longer than its cut: the first ``limit`` characters and the full length."""

    text: str
    length: int


Capped = str | CutText | None


_ENCODE = json.JSONEncoder(ensure_ascii=False, default=str).encode
"""``json.dumps(value, ensure_ascii=False, default=str)`` without building an encoder per call
(report.html cuts every line's metadata)."""


def capped(value: object, limit: int) -> Capped:
    """Text cut to ``limit`` characters as ``{"text", "length"}``; other values as text; None stays."""
    if value is None:
        return None
    text = value if isinstance(value, str) else _ENCODE(value)
    return text if len(text) <= limit else {"text": text[:limit], "length": len(text)}


class BaselineGrade(TypedDict, total=False):
    """One of the baseline's grades as report.html shows it beside this run's (empty entries left
    out: the page reads a missing key as empty)."""

    score: Number
    passed: bool  # present only when true
    error: str | CutText
    rationale: str | CutText


BaselineGrades = dict[str, BaselineGrade]
"""One baseline line's grades, by grader."""


def row_key(rec: ResultRecord) -> RowKey:
    """(model, sample id, run): what tells result lines apart."""
    return rec.get("model"), str(rec.get("sample_id")), rec.get("run") or 0


def shown_grades(rec: ResultRecord) -> BaselineGrades:
    """A baseline line's grades as report.html shows them: texts capped, empty entries left out."""
    out: BaselineGrades = {}
    for name, g in (rec.get("grades") or {}).items():
        grade: BaselineGrade = {}
        score = g.get("score")
        if score or (score is not None and score == 0):  # 0 is shown, None is not
            grade["score"] = score
        if g.get("passed"):
            grade["passed"] = True
        if error := capped(g.get("error"), BASELINE_TEXT_CAP):
            grade["error"] = error
        if rationale := capped(g.get("rationale"), BASELINE_TEXT_CAP):
            grade["rationale"] = rationale
        out[name] = grade
    return out


@dataclass(frozen=True)
class Comparison:
    """A finished run compared with its baseline (see the module docstring)."""

    block: BaselineBlock
    regressed: Mapping[SampleKey, frozenset[str]] = field(default_factory=dict)
    grades: Mapping[RowKey, BaselineGrades] = field(default_factory=dict)

    @property
    def missing(self) -> str | None:
        """Why the baseline could not be compared (None when it was)."""
        return self.block.get("missing")

    @property
    def metrics(self) -> dict[str, BaselineMetric]:
        """Per metric: the baseline's mean and pass rate, this run's, and the deltas."""
        return self.block.get("metrics") or {}

    def grades_of(self, key: RowKey) -> BaselineGrades | None:
        """The same sample's baseline grades: same model and run, else its first run, else a
        model-less baseline's."""
        if not self.grades:
            return None
        model, sid, run = key
        for k in (key, (model, sid, 0), (None, sid, run), (None, sid, 0)):
            if k in self.grades:
                return self.grades[k]
        return None

    def regressed_on(self, key: RowKey) -> frozenset[str]:
        """The metrics on which this line's (model, sample id) regressed."""
        return self.regressed.get(key[:2], frozenset()) if self.regressed else frozenset()


def regressed_index(block: BaselineBlock) -> dict[SampleKey, frozenset[str]]:
    """``block["regressions"]`` as (model, sample id) -> the metrics that regressed there."""
    index: dict[SampleKey, set[str]] = {}
    for change in block.get("regressions") or []:
        sample: SampleKey = (change.get("model"), str(change.get("sample_id")))
        index.setdefault(sample, set()).add(str(change.get("metric")))
    return {k: frozenset(v) for k, v in index.items()}
