"""Tool graders: the four built-in functions of the seeds and custom ``@grader`` functions.

Exact rules (seed ``002``):

* ``exact_match``: ``submission.strip() == ground_truth.strip()``, case-sensitive.
* ``contains``: ``ground_truth.lower() in submission.lower()``, no trimming.
* ``regex_match``: ``re.search(ground_truth, submission)``; an invalid pattern scores 0 with the
  regex error as rationale; a search over :data:`ci_evals._util.rx.MATCH_SECONDS` is an error grade.
* ``ascii_printable_only``: every character is in 32..126 after removing ``\\n`` and ``\\r``
  (a tab fails; an empty submission passes). No ground truth needed.

The three that need a ground truth score 0 with "No ground_truth answer provided" without one.
A custom grader that raises, returns something other than a GradeResult, or a score outside
[0, 1], gives a grade with ``error`` set and score 0.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ci_evals._util.errors import ConfigError
from ci_evals._util.registry import GRADER_FUNCTIONS
from ci_evals._util.rx import PatternTooLong, RegexTimeout, compile_pattern, search
from ci_evals.config.specs import Context, GraderSpec
from ci_evals.core.rule import passes
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.base import Grader
from ci_evals.results.records import Grade, make_grade
from ci_evals.usercode import lane as usercode
from ci_evals.usercode.decorators import grader
from ci_evals.usercode.load import load_module, load_object, split_ref

NO_GT = "No ground_truth answer provided"

Verdict = tuple[float, str, str | None]
"""What a built-in decides: (score, rationale, error or None)."""
Core = Callable[[str, str], Verdict]
"""A built-in's rule: its verdict on (ground truth, submission)."""
GraderFunction = Callable[[Sample, str], Any]
"""A grader function as the suite names it: ``(sample, submission)``, sync or async, returning a
GradeResult (or what :meth:`ToolGrader._check` makes an error grade of)."""


def _exact(truth: str, submission: str) -> Verdict:
    ok = submission.strip() == truth.strip()
    return (1.0, "Exact match: true", None) if ok else (0.0, "Exact match: false", None)


def _contains(truth: str, submission: str) -> Verdict:
    ok = truth.lower() in submission.lower()
    return (
        (1.0, "Contains ground_truth: true", None)
        if ok
        else (0.0, "Contains ground_truth: false", None)
    )


def _regex(pattern: str, submission: str) -> Verdict:
    if (
        re.escape(pattern) == pattern
    ):  # no metacharacter: a search is a substring test, without compiling
        found = pattern in submission
    else:
        try:
            rx = compile_pattern(pattern)
        except PatternTooLong as exc:  # not a verdict on the answer: an error for the sample
            return 0.0, str(exc), f"regex_match: {exc}"
        except ValueError as exc:
            return 0.0, f"Invalid regex pattern: {exc}", None
        try:
            found = search(rx, submission) is not None
        except RegexTimeout as exc:
            return 0.0, str(exc), str(exc)
    return (1.0, "Regex match: true", None) if found else (0.0, "Regex match: false", None)


def _ascii(truth: object, submission: str) -> Verdict:
    if submission.isascii() and submission.isprintable():  # the usual answer, in C
        return 1.0, "All characters are printable ASCII", None
    bad = [ch for ch in submission if ch not in "\n\r" and not (32 <= ord(ch) <= 126)]
    if not bad:
        return 1.0, "All characters are printable ASCII", None
    unique = list(dict.fromkeys(bad))
    shown = ", ".join(repr(c) for c in unique[:5])
    more = f" (+{len(unique) - 5} more)" if len(unique) > 5 else ""
    return 0.0, f"Non-printable-ASCII characters: {shown}{more}", None


def _decide(
    core: Core, needs_truth: bool, truth: str | list[str] | None, submission: str
) -> Verdict:
    """A built-in's verdict; one that compares with the ground truth scores 0 without one."""
    if not needs_truth:
        return core("", submission)
    if not truth:
        return 0.0, NO_GT, None
    if isinstance(truth, list):  # run/perturn grades such a sample turn by turn, never whole
        raise TypeError("a ground_truth list (one per turn) is graded turn by turn")
    return core(truth, submission)


def _result(verdict: Verdict) -> GradeResult:
    score, rationale, error = verdict
    # Every field given, so no default factory runs (they inspect signatures, ~10 µs a grade); with
    # pydantic 2.14 validating them (1.2-1.7 µs) is cheaper than model_construct (2.4-4 µs).
    return GradeResult(score=score, rationale=rationale, metadata={}, error=error)


@grader
def exact_match(sample: Sample, submission: str) -> GradeResult:
    """Case-sensitive equality after trimming whitespace on both sides."""
    return _result(_decide(_exact, True, sample.ground_truth, submission))


@grader
def contains(sample: Sample, submission: str) -> GradeResult:
    """Case-insensitive substring: the ground truth appears in the submission."""
    return _result(_decide(_contains, True, sample.ground_truth, submission))


@grader
def regex_match(sample: Sample, submission: str) -> GradeResult:
    """``re.search`` of the ground truth (a pattern) in the submission."""
    return _result(_decide(_regex, True, sample.ground_truth, submission))


@grader
def ascii_printable_only(sample: Sample, submission: str) -> GradeResult:
    """Every character is printable ASCII (32..126); newlines and carriage returns are allowed."""
    return _result(_ascii(None, submission))


_CORES: dict[GraderFunction, tuple[Core, bool]] = {
    exact_match: (_exact, True),
    contains: (_contains, True),
    regex_match: (_regex, True),
    ascii_printable_only: (_ascii, False),
}
"""Each built-in's verdict on (ground truth, submission), and whether it needs a ground truth."""

BUILTIN_FUNCTIONS = ("exact_match", "contains", "regex_match", "ascii_printable_only")


class ToolSpec(GraderSpec):
    function: str


def resolve_function(name: str, base_dir: Path, key: str) -> GraderFunction:
    """A grader function: ``file.py:func``, a built-in, or a ``@grader`` from custom_evaluators.py."""
    if split_ref(name):
        fn = load_object(name, base_dir, key=key)
    else:
        if name not in GRADER_FUNCTIONS:
            beside = base_dir / "custom_evaluators.py"
            if beside.exists():
                load_module(beside, key=key)
        fn = GRADER_FUNCTIONS.get(name, key=key)
    if not callable(fn):
        raise ConfigError(f"'{name}' is not a function", key=key)
    return fn


class ToolGrader(Grader[ToolSpec]):
    spec_model = ToolSpec

    def __init__(self, name: str, spec: ToolSpec, ctx: Context) -> None:
        super().__init__(name, spec, ctx)
        self.fn = resolve_function(spec.function, ctx.base_dir, f"graders.{name}.function")
        self.is_async = inspect.iscoroutinefunction(self.fn)
        self._rule = _CORES.get(self.fn)  # a built-in's rule; None for a custom function
        self.builtin = self._rule is not None

    def grade_sync(self, sample: Sample, submission: str) -> GradeResult:
        """Grade without the event loop (the built-ins are pure and fast)."""
        return self._check(self.fn(sample, submission))

    def grade_builtin(self, sample: Sample, submission: str, rule: tuple[str, float]) -> Grade:
        """A built-in's grade as results.jsonl holds it, with no GradeResult in between (the
        100k-sample path): the same grade :meth:`grade_sync` leads to, for ``rule``."""
        if self._rule is None:
            raise TypeError(f"grader '{self.spec.function}' is not a built-in")
        score, rationale, error = _decide(*self._rule, sample.ground_truth, submission)
        if error:
            return make_grade(rationale=rationale, error=error)
        return make_grade(score, passes(score, *rule), rationale)

    async def grade(self, sample: Sample, submission: str, trajectory: Trajectory) -> GradeResult:
        try:
            # sync: off the event loop, time-limited; SystemExit and the like are its error (ci_evals.usercode.lane)
            out = await usercode.run(
                self.fn, sample, submission, what=f"grader '{self.spec.function}'"
            )
        except usercode.UserCodeTimeout as exc:
            return GradeResult(score=0.0, rationale=str(exc), error=str(exc))
        except Exception as exc:  # a user's grader failing is that sample's grading error
            msg = f"grader '{self.spec.function}' raised {usercode.describe(exc)}"
            return GradeResult(score=0.0, rationale=msg, error=msg)
        return self._check(out)

    def _check(self, out: object) -> GradeResult:
        if not isinstance(out, GradeResult):
            # Accept foreign GradeResult-like objects (e.g. a real letta_evals GradeResult).
            score = getattr(out, "score", None)
            if score is None:
                msg = f"grader '{self.spec.function}' returned {type(out).__name__}, expected GradeResult"
                return GradeResult(score=0.0, rationale=msg, error=msg)
            out = GradeResult(
                score=score,
                rationale=getattr(out, "rationale", None),
                metadata=dict(getattr(out, "metadata", None) or {}),
            )
        if not (
            isinstance(out.score, (int, float))
            and math.isfinite(out.score)
            and 0.0 <= out.score <= 1.0
        ):
            msg = f"grader '{self.spec.function}' returned score {out.score!r}, outside [0, 1]"
            return GradeResult(score=0.0, rationale=msg, error=msg, metadata=out.metadata)
        return out
