"""junit.xml: valid against a JUnit XSD, and read back with junitparser."""

from __future__ import annotations

from pathlib import Path

import pytest
import xmlschema
from junitparser import Error, Failure, JUnitXml, Skipped

from ci_evals.reports.junit import write_junit
from tests.fakes import report_data as data

XSD = Path(__file__).parent / "data" / "junit.xsd"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(XSD)


def write(tmp_path: Path, summary: dict, results: list[dict]) -> Path:
    path = tmp_path / "junit.xml"
    write_junit(summary, results, path)
    return path


def suites_by_name(path: Path) -> dict:
    return {s.name: s for s in JUnitXml.fromfile(str(path))}


def test_report_is_valid_against_the_xsd(tmp_path, schema):
    schema.validate(str(write(tmp_path, data.baseline_summary(), data.results())))


def test_a_suite_per_metric_and_one_for_the_gates(tmp_path):
    suites = suites_by_name(write(tmp_path, data.summary(), data.results()))
    assert list(suites) == ["qa.quality", "qa.exact", "qa.gates"]
    counts = {n: (s.tests, s.failures, s.errors, s.skipped) for n, s in suites.items()}
    assert counts == {
        "qa.quality": (6, 2, 1, 0),
        "qa.exact": (6, 3, 1, 0),
        "qa.gates": (2, 2, 0, 0),  # the gate and the verdict
    }


def test_suite_times_are_the_run_wall_time_and_cases_keep_their_own(tmp_path):
    path = write(tmp_path, data.summary(), data.results())
    xml = JUnitXml.fromfile(str(path))
    suites = suites_by_name(path)
    assert xml.time == 12.0  # duration_s, not the 1.75 s the concurrent samples add up to
    assert {s.name: s.time for s in suites.values()} == {
        "qa.quality": 12.0,
        "qa.exact": 12.0,
        "qa.gates": 12.0,
    }
    assert [c.time for c in suites["qa.quality"]] == [0.25] * 5 + [0.5]


def test_verdict_testcase_fails_unless_the_run_passed(tmp_path):
    gates = suites_by_name(
        write(
            tmp_path,
            data.summary(verdict="errored", verdict_reason="no sample ran"),
            data.results(),
        )
    )["qa.gates"]
    case = next(c for c in gates if c.name == "verdict")
    (failure,) = case.result
    assert (failure.type, failure.message) == ("errored", "errored: no sample ran")
    passing = suites_by_name(write(tmp_path, data.passing_summary(), data.results()))["qa.gates"]
    assert next(c for c in passing if c.name == "verdict").result == []
    assert {p.name: p.value for p in passing.properties()}["verdict"] == "passed"


def test_failure_below_threshold_carries_the_rationale(tmp_path):
    suite = suites_by_name(write(tmp_path, data.summary(), data.results()))["qa.quality"]
    case = next(c for c in suite if c.name == "sample 4")
    (failure,) = case.result
    assert isinstance(failure, Failure)
    assert failure.message == "score 0.300 does not meet score >= 0.75"
    assert failure.type == "below_threshold"
    assert failure.text == "judge says 0.3"
    assert case.classname == "qa.quality"
    assert case.time == 0.25
    assert case.system_out == "input: question 4\nsubmission: reply 4"


def test_errored_sample_is_an_error_with_its_category(tmp_path):
    suite = suites_by_name(write(tmp_path, data.summary(), data.results()))["qa.exact"]
    case = next(c for c in suite if c.name == "sample 6")
    (error,) = case.result
    assert isinstance(error, Error)
    assert error.type == "target"
    assert error.message == "target error: agent exited with code 1: boom"


def test_passing_sample_has_no_result(tmp_path):
    suite = suites_by_name(write(tmp_path, data.summary(), data.results()))["qa.quality"]
    assert next(c for c in suite if c.name == "sample 1").result == []


def test_properties_name_the_suite_and_versions(tmp_path):
    suite = suites_by_name(write(tmp_path, data.summary(), data.results()))["qa.quality"]
    props = {p.name: p.value for p in suite.properties()}
    assert props == {
        "suite": "qa",
        "verdict": "failed",
        "version.ci_evals": "0.1.0",
        "version.python": "3.11.7",
        "version.openai": "3.54.0",
        "metric": "quality",
        "label": "Answer quality",
        "kind": "score_model",
        "rule": "score >= 0.75",
        "mean": "0.583300",
        "pass_rate": "0.500000",
        "graded": "5",
        "errors": "1",
    }
    assert suite.timestamp == "2026-11-22T10:00:00"


def test_gate_cases_failed_inconclusive_and_no_baseline(tmp_path):
    doc = data.baseline_summary()
    doc["gates"].append(
        {
            "metric_key": "quality",
            "metric": "avg_score",
            "op": None,
            "value": None,
            "actual": 0.5833,
            "passed": True,
            "status": "no_baseline",
            "model": None,
            "description": "quality avg_score max_drop 0.05",
            "interval": None,
            "label": "Answer quality",
            "reason": "no baseline: run without --baseline (on_missing_baseline: pass)",
        }
    )
    gates = suites_by_name(write(tmp_path, doc, data.results()))["qa.gates"]
    results = {c.name: c.result for c in gates}
    assert [type(r[0]) for r in results.values()] == [Failure, Failure, Skipped, Failure]
    first = results["Answer quality (quality) avg_score gte 0.5 @0.95"][0]
    assert (first.type, first.message) == (
        "inconclusive",
        "inconclusive: avg_score 0.5833, 0.95 interval [0.3500, 0.8000] straddles >= 0.5; "
        "1 of 6 samples errored (within max_errors 1)",
    )
    assert (
        results["Answer quality (quality) avg_score max_drop 0.05"][0].message
        == "no baseline: run without --baseline (on_missing_baseline: pass)"
    )
    assert {p.name: p.value for p in gates.properties()}["gate.passed"] == "false"


def test_illegal_xml_characters_and_markup_in_model_output(tmp_path, schema):
    rows = data.results()
    rows[3]["grades"]["quality"]["rationale"] = "bad \x00\x1b chars </failure><x/> & more"
    path = write(tmp_path, data.summary(), rows)
    schema.validate(str(path))
    case = next(c for c in suites_by_name(path)["qa.quality"] if c.name == "sample 4")
    assert case.result[0].text == "bad  chars </failure><x/> & more"


def test_runs_and_models_name_the_testcase(tmp_path):
    rows = [dict(data.results()[0], run=1, model="gpt-x")]
    suite = suites_by_name(write(tmp_path, data.summary(num_runs=2), rows))["qa.quality"]
    assert [c.name for c in suite] == ["sample 1 run 1 · gpt-x"]


def test_junit_stays_near_its_budget_with_many_graders_and_long_texts(tmp_path, monkeypatch):
    """40 graders x 500 samples of 5,000-character texts: 200 MB unbounded; the budget holds it near 1 MB."""
    import ci_evals.reports.junit as junit

    monkeypatch.setattr(junit, "BUDGET", 1_000_000)
    graders = [f"g{i}" for i in range(40)]
    summary = {
        "suite": "big",
        "num_runs": 1,
        "gates": [],
        "gate": {"passed": False},
        "metrics": {g: {"n": 500, "pass_rule": "score >= 1", "kind": "tool"} for g in graders},
    }
    rows = (
        {
            "sample_id": i,
            "input": "i" * 5000,
            "duration_s": 0.1,
            "submission": {g: "s" * 5000 for g in graders},
            "grades": {
                g: {"score": 0.0, "passed": False, "rationale": "r" * 5000} for g in graders
            },
        }
        for i in range(500)
    )
    path = tmp_path / "junit.xml"
    write_junit(summary, rows, path)
    size = path.stat().st_size
    assert 1_000_000 < size < 1_000_000 + 40 * 500 * 400
    xml = JUnitXml.fromfile(str(path))
    assert sum(s.tests for s in xml) == 40 * 500 + 1  # + the verdict testcase
    assert junit.field_limit(20_000) == 200 and junit.field_limit(10) == junit.FIELD_LIMIT
