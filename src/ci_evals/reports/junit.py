"""junit.xml: a testsuite per metric (a testcase per sample) and one testsuite for the gates.

CI systems (GitHub test reporters, GitLab, Jenkins) show a sample below its grader's pass threshold
as a failure and a sample that could not be graded as an error. The gates testsuite ends with a
``verdict`` testcase that fails unless the run's verdict is ``passed``, and every testsuite has a
``verdict`` property. Testsuite times are the run's wall time (samples run concurrently, so their
sum would overstate it); each testcase keeps its own sample's time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TextIO
from xml.sax.saxutils import escape, quoteattr

from ci_evals._util.text import fit
from ci_evals.reports import costspeed
from ci_evals.reports.digest import input_text, sample_label
from ci_evals.reports.markdown import gate_description
from ci_evals.results.records import Grade, MetricEntry, RecordError, ResultRecord, Summary
from ci_evals.results.writer import open_atomic

FIELD_LIMIT = 20_000
"""Characters kept per rationale, submission or input: the report stays loadable by CI viewers."""
BUDGET = 50_000_000
"""Characters of testcase text: per-field limits shrink with the number of testcases to stay near
it, and past it testcases carry no text at all (40 graders x 10,000 samples: ~200 MB, not 1.6 GB)."""
MIN_FIELD = 200
_QUOT = {'"': "&quot;"}  # always double quotes, as before


def field_limit(cases: int) -> int:
    """Characters kept per field when ``cases`` testcases share the budget (input, submission, rationale)."""
    return max(MIN_FIELD, min(FIELD_LIMIT, BUDGET // max(1, 3 * cases)))


def _common_properties(summary: Summary) -> dict[str, str]:
    props = {"suite": str(summary.get("suite")), "verdict": str(summary.get("verdict"))}
    for lib, version in (summary.get("versions") or {}).items():
        props[f"version.{lib}"] = str(version)
    props.update(costspeed.totals(summary))  # the run's cost and speed (none in older folders)
    return props


def _metric_properties(summary: Summary, name: str, metric: MetricEntry) -> dict[str, str]:
    return {
        **_common_properties(summary),
        "metric": name,
        "label": str(metric.get("label") or name),
        "kind": str(metric.get("kind")),
        "rule": str(metric.get("rule") or metric.get("pass_rule")),
        "mean": "none" if (mean := metric.get("mean")) is None else f"{float(mean):.6f}",
        "pass_rate": "none" if (rate := metric.get("pass_rate")) is None else f"{float(rate):.6f}",
        "graded": str(metric.get("graded")),
        "errors": str(metric.get("errors")),
    }


def _timestamp(iso: str | None) -> str | None:
    """JUnit's timestamp form: UTC, to the second, without a zone suffix."""
    if not iso:
        return None
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


_ILLEGAL = "\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff"
_ILLEGAL_XML = re.compile(f"[{_ILLEGAL}]")
_TEXT_SPECIAL = re.compile(f"[&<>{_ILLEGAL}]")
_ATTR_SPECIAL = re.compile(f'[&<>"\n\r\t{_ILLEGAL}]')


def _clean(text: str) -> str:
    """Drop characters XML 1.0 cannot carry (control characters from model output)."""
    return _ILLEGAL_XML.sub("", text)


def _error_xml(row_error: RecordError | None, grade: Grade, limit: int) -> tuple[str, str]:
    """The <error> element of a testcase whose sample or grade errored (or has no grade)."""
    category = (
        (row_error.get("category") if row_error else None)
        or grade.get("error_category")
        or "grading"
    )
    message = (
        (row_error.get("message") if row_error else None)
        or grade.get("error")
        or "no grade recorded"
    )
    return (
        f"<error message={_attr(fit(f'{category} error: {message}', min(1000, max(limit, 200))))} "
        f"type={_attr(category)}>{_text(fit(str(message), limit))}</error>"
    ), "error"


def _failure_xml(grade: Grade, rule: str, limit: int) -> str:
    """The <failure> element of a graded testcase below its pass rule."""
    score = float(grade.get("score") or 0.0)
    rationale = fit(str(grade.get("rationale") or ""), limit)
    return (
        f'<failure message={_attr(f"score {score:.3f} does not meet {rule}")} type="below_threshold"'
        + (f">{_text(rationale)}</failure>" if rationale else "/>")
    )


_Outcome = tuple[str, dict[str, str], str]
"""A testcase's <failure>, <error> or <skipped>: (tag, attributes, text)."""
_Case = tuple[dict[str, str], _Outcome | None, str]
"""A testcase built from parts: (attributes, outcome or None for a pass, system-out)."""


def _gate_cases(summary: Summary) -> list[_Case]:
    cases: list[_Case] = []
    for gate in summary.get("gates") or []:
        desc = gate_description(gate)
        model = f" [{gate['model']}]" if gate.get("model") else ""
        attrs = {
            "name": desc + model,
            "classname": f"{summary.get('suite')}.gates",
            "time": "0.000000",
        }
        status = gate.get("status") or ("passed" if gate.get("passed") else "failed")
        result: _Outcome | None = None
        if not gate.get("passed"):
            result = ("failure", {"message": f"{status}: {gate.get('reason')}", "type": status}, "")
        elif status == "no_baseline":
            result = (
                "skipped",
                {"message": str(gate.get("reason") or "no baseline to compare with")},
                "",
            )
        cases.append((attrs, result, ""))
    verdict = str(summary.get("verdict"))
    attrs = {"name": "verdict", "classname": f"{summary.get('suite')}.gates", "time": "0.000000"}
    result = (
        None
        if verdict == "passed"
        else (
            "failure",
            {"message": f"{verdict}: {summary.get('verdict_reason')}", "type": verdict},
            "",
        )
    )
    cases.append((attrs, result, ""))
    return cases


def _text(value: str) -> str:
    """XML character data: the standard library's escaping, after dropping what XML 1.0 cannot carry
    (a text with nothing to escape or drop, the usual one, is returned as it is)."""
    return escape(_clean(value)) if _TEXT_SPECIAL.search(value) else value


def _attr(value: str) -> str:
    """A double-quoted XML attribute value: the standard library's quoting (newlines kept as &#10;)."""
    return quoteattr(_clean(value), _QUOT) if _ATTR_SPECIAL.search(value) else f'"{value}"'


def _attrs(attrs: Mapping[str, object]) -> str:
    return " ".join(f"{k}={_attr(str(v))}" for k, v in attrs.items())


class _SuiteWriter:
    """One <testsuite>: its testcases are streamed to a spool file while the counts add up."""

    def __init__(
        self, name: str, properties: dict[str, str], timestamp: str | None, wall: float
    ) -> None:
        import tempfile

        self.name, self.properties, self.timestamp = name, properties, timestamp
        self.tests = self.failures = self.errors = self.skipped = 0
        self.time = wall
        self.spool = tempfile.TemporaryFile("w+", encoding="utf-8")
        self._pending: list[str] = []

    def add_xml(self, xml: str, tag: str | None) -> None:
        """Append one ready <testcase> element and count it."""
        self.tests += 1
        if tag is not None:
            self.failures += tag == "failure"
            self.errors += tag == "error"
            self.skipped += tag == "skipped"
        self._pending.append(xml)
        if len(self._pending) >= 512:  # one write per 512 testcases, not one each
            self.spool.write("".join(self._pending))
            self._pending.clear()

    def add(self, attrs: dict[str, str], result: _Outcome | None, stdout: str) -> None:
        """Append one <testcase> built from parts (the gate cases)."""
        parts = [f"    <testcase {_attrs(attrs)}>"]
        tag = None
        if result is not None:
            tag, rattrs, text = result
            parts.append(
                f"<{tag} {_attrs(rattrs)}>{_text(text)}</{tag}>"
                if text
                else f"<{tag} {_attrs(rattrs)}/>"
            )
        if stdout:
            parts.append(f"<system-out>{_text(stdout)}</system-out>")
        parts.append("</testcase>\n")
        self.add_xml("".join(parts), tag)

    def write_to(self, out: TextIO) -> None:
        attrs: dict[str, str | int] = {
            "name": self.name,
            "tests": self.tests,
            "failures": self.failures,
            "errors": self.errors,
            "skipped": self.skipped,
            "time": f"{self.time:.6f}",
        }
        if self.timestamp:
            attrs["timestamp"] = self.timestamp
        out.write(f"  <testsuite {_attrs(attrs)}>\n")
        out.write("    <properties>\n")
        for k, v in self.properties.items():
            out.write(f"      <property {_attrs({'name': k, 'value': v})}/>\n")
        out.write("    </properties>\n")
        self.spool.write("".join(self._pending))
        self._pending.clear()
        self.spool.seek(0)
        import shutil

        shutil.copyfileobj(self.spool, out)
        self.spool.close()
        out.write("  </testsuite>\n")


class JunitWriter:
    """junit.xml built one result line at a time (:meth:`add`), then written whole (:meth:`write`):
    one testsuite per metric with a testcase per result line, plus the gates.

    Streams: each testcase goes to its testsuite's spool file as its line is read, so 100k samples
    need no more memory than 10. (junit-xml, which builds the whole document in memory, needed
    ~700 MB for 100k samples.)
    """

    def __init__(self, summary: Summary) -> None:
        self.summary = summary
        self.suite = str(summary.get("suite"))
        self.metrics = summary.get("metrics") or {}
        self.stamp = _timestamp(summary.get("started_at"))
        self.wall = float(summary.get("duration_s") or 0.0)
        self.num_runs = int(summary.get("num_runs") or 1)
        self.writers: dict[str, _SuiteWriter] = {
            name: _SuiteWriter(
                f"{self.suite}.{name}", _metric_properties(summary, name, m), self.stamp, self.wall
            )
            for name, m in self.metrics.items()
        }
        self.limit = field_limit(
            sum(int(m.get("n") or 0) for m in self.metrics.values() if isinstance(m, dict))
        )
        self.written = 0
        self.measured = costspeed.block_of(summary) is not None  # older folders: as before
        self._per_metric: dict[
            str, tuple[_SuiteWriter, str, str]
        ] = {}  # name -> (writer, classname attr, rule)
        self._failures: dict[
            tuple[str, float, str | None, int], str
        ] = {}  # (rule, score, rationale, limit) -> <failure> element

    def _metric(self, name: str) -> tuple[_SuiteWriter, str, str]:
        if name not in self.writers:
            self.writers[name] = _SuiteWriter(
                f"{self.suite}.{name}", _common_properties(self.summary), self.stamp, self.wall
            )
        metric = self.metrics.get(name) or {}
        rule = metric.get("rule") or metric.get("pass_rule") or "pass threshold"
        parts = self._per_metric[name] = (self.writers[name], _attr(f"{self.suite}.{name}"), rule)
        return parts

    def add(self, row: ResultRecord) -> None:
        """One result line: a testcase in each of its metrics' testsuites."""
        if self.written > BUDGET:
            self.limit = 0  # the budget is spent: the remaining testcases keep their verdicts only
        limit = self.limit
        input_xml = _text(f"input: {fit(input_text(row.get('input')), limit)}")
        head = f"    <testcase name={_attr(sample_label(row, self.num_runs))} classname="
        time = f"{float(row.get('duration_s') or 0.0):.6f}"
        props = ""  # the line's latency, tokens, cost and steps: once for all its testcases
        if self.measured and (values := costspeed.testcase_properties(row)):
            props = (
                "<properties>"
                + "".join(
                    f"<property {_attrs({'name': k, 'value': v})}/>" for k, v in values.items()
                )
                + "</properties>"
            )
        grades = row.get("grades") or {}
        row_error = row.get("error")
        subs = row.get("submission") or {}
        same_as = row.get("submission_same_as") or {}
        outs: dict[str, str] = {}  # a submission several graders saw is escaped once
        failures = self._failures
        written = self.written
        for name in grades:
            writer, classname, rule = self._per_metric.get(name) or self._metric(name)
            if name in subs:  # results.line.submission_of, inlined: four times a line
                submission = subs[name]
            else:
                other = same_as.get(name)
                submission = subs.get(other) if other is not None else None
            if submission is None:
                out = input_xml
            else:
                text = str(submission)
                shown = outs.get(text)
                if shown is None:
                    shown = outs[text] = f"{input_xml}\n{_text('submission: ' + fit(text, limit))}"
                out = shown
            grade = grades.get(name) or {}
            if row_error or not grade or grade.get("error"):
                result, tag = _error_xml(row_error, grade, limit)
            elif grade.get("passed"):
                result, tag = "", None
            else:  # the same failure (score, rationale) recurs across samples: built once
                tag = "failure"
                score, why = grade.get("score"), grade.get("rationale")
                if (
                    score.__class__ is not float
                    or not (why is None or why.__class__ is str)
                    or (not score and math.copysign(1.0, score) < 0)
                ):  # -0.0 == 0.0, but prints "-0.000"
                    result = _failure_xml(grade, rule, limit)
                else:
                    key = (rule, score, why, limit)
                    made = failures.get(key)
                    if made is None:
                        if len(failures) >= 4096:
                            failures.clear()
                        made = failures[key] = _failure_xml(grade, rule, limit)
                    result = made
            xml = f'{head}{classname} time="{time}">{props}{result}<system-out>{out}</system-out></testcase>\n'
            written += len(xml)
            writer.add_xml(xml, tag)
        self.written = written

    def write(self, path: Path) -> None:
        """The whole document, with the gates testsuite last, written atomically to ``path``."""
        summary, wall = self.summary, self.wall
        gates = _SuiteWriter(
            f"{self.suite}.gates",
            {
                **_common_properties(summary),
                "gate.passed": str(
                    bool((summary.get("gate") or {"passed": False})["passed"])
                ).lower(),
            },
            self.stamp,
            wall,
        )
        for case in _gate_cases(summary):
            gates.add(*case)
        all_suites = [*self.writers.values(), gates]
        with open_atomic(Path(path)) as out:
            out.write('<?xml version="1.0" encoding="utf-8"?>\n')
            totals: dict[str, int | str] = {
                k: sum(getattr(w, k) for w in all_suites) for k in ("tests", "failures", "errors")
            }
            totals["time"] = f"{wall:.6f}"
            out.write(f"<testsuites {_attrs({**totals, 'name': self.suite})}>\n")
            for w in all_suites:
                w.write_to(out)
            out.write("</testsuites>\n")


def write_junit(summary: Summary, results: Iterable[ResultRecord], path: Path) -> None:
    """Write junit.xml from ``summary`` and one pass over ``results`` (see :class:`JunitWriter`)."""
    writer = JunitWriter(summary)
    for row in results:
        writer.add(row)
    writer.write(path)
