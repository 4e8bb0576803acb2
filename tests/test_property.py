"""Properties of the aggregation and concurrency safety of the results file and the LLM cache.

* Hypothesis draws result sets (scores, errors of each category, repeats, models, reducers, rules):
  the summary equals a recomputation from results.jsonl, equals an independent oracle written
  here, and does not depend on the order the records arrive in. A second property goes through
  the real runner (random outcomes per sample and run, random concurrency).
* 200 samples in flight against the OpenAI fake with the cache on: one valid JSON line per
  (sample, run), one cache entry per distinct request, and a second run makes zero requests.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ci_evals.cli.app import main
from ci_evals.core.rule import OPS
from ci_evals.gating.aggregate import Aggregator
from ci_evals.gating.summary import Provenance
from ci_evals.gating.summary import summarize as build_summary
from ci_evals.reports.write import own_results
from tests.fakes.openai_server import CHAT, FakeOpenAI

REDUCERS = ["mean", "median", "max", "pass_at_k", "pass_all_k", "majority"]
SCORES = st.one_of(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.floats(0, 1, allow_nan=False))
COMPARED = (
    "metrics",
    "models",
    "gate",
    "gates",
    "n_samples",
    "errors",
    "records",
    "cache",
    "retries",
)


# ---------------------------------------------------------------- the oracle


def oracle_reduce(
    reducer: str, runs: list[tuple[float, bool, bool]], rule: tuple[str, float]
) -> tuple[float, bool, bool]:
    """One (score, passed, errored) per sample from its runs, written independently of aggregate.py.

    A single run is taken as it is: the reducer combines repeats only (``num_runs > 1``). Any
    errored run makes the sample errored: no score, not passed.
    """
    if any(e for _, _, e in runs):
        return None, False, True
    if len(runs) == 1:
        return runs[0]
    scores = [s for s, _, _ in runs]
    oks = [ok for _, ok, _ in runs]
    errored = False
    if reducer in ("pass_at_k", "pass_all_k", "majority"):
        ok = {"pass_at_k": any(oks), "pass_all_k": all(oks), "majority": sum(oks) > len(oks) / 2}[
            reducer
        ]
        return float(ok), ok, errored
    value = {
        "mean": statistics.fmean(scores),
        "median": statistics.median(scores),
        "max": max(scores),
    }[reducer]
    return value, OPS[rule[0]](value, rule[1]), errored


def oracle(records: list[dict], config: dict) -> dict[str, Any]:
    """Per-metric n, errors, passed, mean, min, max and the error counts, from the records alone.

    Score aggregates are over graded samples (None when none was graded); errored grades fail."""
    runs: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    by_cat = {"target": 0, "extraction": 0, "grading": 0}
    groups: dict[tuple, int] = defaultdict(int)
    errored_lines = 0
    for rec in records:
        if rec["error"]:
            by_cat[rec["error"]["category"]] += 1
            groups[(rec["error"]["category"], None, rec["error"]["message"])] += 1
        errored_lines += bool(rec["error"]) or any(g["error"] for g in rec["grades"].values())
        for name, g in rec["grades"].items():
            if g["error"] and not rec["error"]:
                by_cat[g.get("error_category", "grading")] += 1
                groups[(g.get("error_category", "grading"), name, g["error"])] += 1
            score = None if g["error"] else g["score"]
            runs[(rec["model"], str(rec["sample_id"]))][name].append(
                (score, g["passed"] and not g["error"], bool(g["error"]))
            )
    metrics = {}
    for name, info in config["graders"].items():
        reduced = [
            oracle_reduce(config["reducer"], per[name], tuple(info["rule"]))
            for per in runs.values()
        ]
        scores = [s for s, _, e in reduced if not e]
        metrics[name] = {
            "n": len(reduced),
            "errors": sum(e for _, _, e in reduced),
            "passed": sum(ok for _, ok, _ in reduced),
            "mean": math.fsum(scores) / len(scores) if scores else None,
            "min": min(scores, default=None),
            "max": max(scores, default=None),
        }
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or "", kv[0][2]))
    return {
        "metrics": metrics,
        "errors": {
            "total": sum(by_cat.values()),
            "samples": errored_lines,
            "by_category": by_cat,
            "groups": [
                {"category": c, "grader": g, "message": m, "count": k} for (c, g, m), k in ordered
            ],
        },
    }


def summarize(records: list[dict], config: dict) -> dict[str, Any]:
    agg = Aggregator(config)
    for rec in records:
        agg.add(rec)
    return build_summary(
        Provenance(),
        config,
        agg,
        started=datetime(2026, 1, 1, tzinfo=UTC),
        duration=1.0,
        partial=False,
    )


def check_against_oracle(summary: dict, records: list[dict], config: dict) -> None:
    want = oracle(records, config)
    assert summary["errors"] == want["errors"]
    for name, m in want["metrics"].items():
        got = summary["metrics"][name]
        assert {k: got[k] for k in ("n", "errors", "passed")} == {
            k: m[k] for k in ("n", "errors", "passed")
        }
        assert got["graded"] == m["n"] - m["errors"]
        for k in ("mean", "min", "max"):
            assert (got[k] is None) == (m[k] is None), k
            if m[k] is not None:
                assert got[k] == pytest.approx(m[k], rel=1e-12, abs=1e-12), k
        assert got["pass_rate"] == pytest.approx(m["passed"] / m["n"], rel=1e-12)


# ---------------------------------------------------------------- property 1: records written directly


@st.composite
def result_sets(draw) -> tuple[dict, list[dict]]:
    names = draw(
        st.lists(st.sampled_from(["acc", "judge", "style"]), min_size=1, max_size=3, unique=True)
    )
    rules = {
        n: [draw(st.sampled_from(["gte", "gt"])), draw(st.sampled_from([0.25, 0.5, 0.75, 1.0]))]
        for n in names
    }
    num_runs = draw(st.integers(1, 3))
    models = draw(st.sampled_from([[None], ["openai/a", "openai/b"]]))
    config = {
        "graders": {
            n: {"label": n, "kind": "tool", "rule": rules[n], "extractor": "last_assistant"}
            for n in names
        },
        "gates": [
            {
                "metric_key": names[0],
                "metric": draw(st.sampled_from(["avg_score", "accuracy", "p50"])),
                "op": "gte",
                "value": draw(st.sampled_from([0.0, 0.5, 0.9])),
            }
        ],
        "num_runs": num_runs,
        "reducer": draw(st.sampled_from(REDUCERS)),
        "target": {"kind": "replay"},
        "pricing": {},
        "usage_models": {},
    }
    records = []
    for model in models:
        for sid in (
            range(draw(st.integers(1, 10)))
            if model == models[0]
            else sorted({r["sample_id"] for r in records})
        ):
            for run in range(num_runs):
                rec: dict[str, Any] = {
                    "sample_id": sid,
                    "run": run,
                    "model": model,
                    "input": f"q{sid}",
                    "ground_truth": None,
                    "tags": [],
                    "error": None,
                    "grades": {},
                    "submission": {n: "" for n in names},
                    "usage": {"prompt_tokens": draw(st.integers(0, 50)), "completion_tokens": 1},
                    "duration_s": 0.01,
                }
                if draw(st.integers(0, 9)) == 0:
                    cat = draw(st.sampled_from(["target", "extraction", "grading"]))
                    rec["error"] = {"category": cat, "message": f"{cat} failed"}
                    rec["grades"] = {
                        n: {
                            "score": 0.0,
                            "passed": False,
                            "rationale": "x",
                            "error": "x",
                            "error_category": cat,
                            "metadata": {},
                        }
                        for n in names
                    }
                else:
                    for n in names:
                        if draw(st.integers(0, 7)) == 0:
                            cat = draw(st.sampled_from(["extraction", "grading"]))
                            rec["grades"][n] = {
                                "score": 0.0,
                                "passed": False,
                                "rationale": "e",
                                "error": "e",
                                "error_category": cat,
                                "metadata": {"retries": draw(st.integers(0, 3))},
                            }
                        else:
                            s = draw(SCORES)
                            rec["grades"][n] = {
                                "score": s,
                                "passed": OPS[rules[n][0]](s, rules[n][1]),
                                "rationale": None,
                                "error": None,
                                "metadata": {"cache_hits": draw(st.integers(0, 2))},
                            }
                    rec["retries"] = draw(st.integers(0, 2))
                records.append(rec)
    return config, records


@settings(max_examples=75, deadline=None)
@given(data=result_sets(), seed=st.integers(0, 2**32 - 1))
def test_summary_equals_recomputation_from_results_file(data, seed):
    config, records = data
    shuffled = list(records)
    random.Random(seed).shuffle(shuffled)
    live = summarize(shuffled, config)  # as a live run would see them: in completion order
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in shuffled), encoding="utf-8")
        recomputed = summarize(list(own_results(path)), config)
    assert {k: live.get(k) for k in COMPARED} == {k: recomputed.get(k) for k in COMPARED}
    in_order = summarize(records, config)
    assert {k: in_order.get(k) for k in COMPARED} == {k: live.get(k) for k in COMPARED}
    assert sorted(map(json.dumps, in_order["flaky"])) == sorted(map(json.dumps, live["flaky"]))
    check_against_oracle(live, records, config)
    assert live["records"] == len(records)
    assert live["retries"] == sum(
        (r.get("retries") or 0) + sum(g["metadata"].get("retries", 0) for g in r["grades"].values())
        for r in records
    )
    assert live["cache"]["hits"] == sum(
        g["metadata"].get("cache_hits", 0) for r in records for g in r["grades"].values()
    )


# ---------------------------------------------------------------- property 2: through the real runner

GRADER = """
from ci_evals import GradeResult, extractor

seen = {}

@extractor
def prop_picky(trajectory, config):
    text = trajectory[-1][-1].content
    if text == "NOEXTRACT":
        raise ValueError("nothing to extract")
    return text

def scripted(sample, submission):
    k = seen[sample.id] = seen.get(sample.id, -1) + 1
    score = sample.metadata["scores"][k]
    if score is None:
        raise RuntimeError("grader bug")
    return GradeResult(score=score, rationale=f"run {k}")
"""


@st.composite
def run_plans(draw) -> dict[str, Any]:
    num_runs = draw(st.integers(1, 3))
    samples = []
    for i in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["ok", "ok", "ok", "no_output", "no_extract"]))
        scores = draw(st.lists(st.one_of(st.none(), SCORES), min_size=num_runs, max_size=num_runs))
        samples.append({"id": i, "kind": kind, "scores": scores})
    return {
        "num_runs": num_runs,
        "reducer": draw(st.sampled_from(REDUCERS)),
        "samples": samples,
        "max_concurrent": draw(st.integers(1, 8)),
        "threshold": draw(st.sampled_from([0.5, 1.0])),
    }


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=run_plans())
def test_real_runner_summary_equals_recomputation(plan):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "g.py").write_text(GRADER, encoding="utf-8")
        rows = [
            {"id": s["id"], "input": "q", "metadata": {"scores": s["scores"]}}
            for s in plan["samples"]
        ]
        outs = [
            {"id": s["id"], "output": "NOEXTRACT" if s["kind"] == "no_extract" else "answer"}
            for s in plan["samples"]
            if s["kind"] != "no_output"
        ]
        (root / "dataset.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
        )
        (root / "outputs.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in outs), encoding="utf-8"
        )
        suite = {
            "name": "prop",
            "dataset": "dataset.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {
                "s": {"kind": "tool", "function": "g.py:scripted", "extractor": "g.py:prop_picky"}
            },
            "gate": {"op": "gte", "value": plan["threshold"]},
            "num_runs": plan["num_runs"],
            "reducer": plan["reducer"],
            "max_concurrent": plan["max_concurrent"],
        }
        (root / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
        rc = main(
            ["run", str(root / "suite.yaml"), "--output", str(root / "out"), "--no-cache", "-q"]
        )
        summary = json.loads((root / "out" / "summary.json").read_text(encoding="utf-8"))
        records = list(own_results(root / "out" / "results.jsonl"))
    assert rc == (0 if summary["gate"]["passed"] else 1)
    assert (rc == 0) == (summary["verdict"] == "passed")
    n, k = len(plan["samples"]), plan["num_runs"]
    assert len(records) == n * k and len({(r["sample_id"], r["run"]) for r in records}) == n * k
    recomputed = summarize(records, summary["config"])
    assert {key: summary.get(key) for key in COMPARED} == {
        key: recomputed.get(key) for key in COMPARED
    }
    check_against_oracle(summary, records, summary["config"])

    # The outcomes are the planned ones: per sample, the multiset of run scores and errors.
    def order(t):
        return (t[0] is None, t[0] or 0.0, t[1])

    for s in plan["samples"]:
        got = sorted(
            (
                (
                    r["grades"]["s"]["score"],
                    r["error"]["category"]
                    if r["error"]
                    else r["grades"]["s"].get("error_category", ""),
                )
                for r in records
                if r["sample_id"] == s["id"]
            ),
            key=order,
        )
        if s["kind"] == "no_output":
            want = [(None, "target")] * k
        elif s["kind"] == "no_extract":
            want = [(None, "extraction")] * k
        else:
            want = sorted(
                ((None, "grading") if v is None else (v, "") for v in s["scores"]), key=order
            )
        assert got == want


# ---------------------------------------------------------------- 200 in flight with the cache on


def test_200_in_flight_results_and_cache_stay_consistent(tmp_path, monkeypatch):
    n, distinct = 200, 150
    with FakeOpenAI(latency=0.2) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-property-000000")
        # Samples 150..199 repeat the input and answer of samples 0..49: identical requests.
        rows = [
            {
                "id": f"s{i}",
                "input": f"The answer is w{i % distinct}",
                "ground_truth": f"w{i % distinct}",
            }
            for i in range(n)
        ]
        (tmp_path / "dataset.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
        )
        suite = {
            "name": "concurrency",
            "dataset": "dataset.jsonl",
            "max_concurrent": 200,
            "cache": "cache",
            "target": {"kind": "model", "model": "gpt-4o-mini"},
            "graders": {"judge": {"kind": "rubric", "prompt": "Is the expected answer given?"}},
            "gate": {"op": "gte", "value": 0.5},
        }
        (tmp_path / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")

        def run(out: str) -> tuple[dict, list[str]]:
            assert (
                main(["run", str(tmp_path / "suite.yaml"), "--output", str(tmp_path / out), "-q"])
                == 0
            )
            lines = (tmp_path / out / "results.jsonl").read_text(encoding="utf-8").splitlines()
            return json.loads((tmp_path / out / "summary.json").read_text(encoding="utf-8")), lines

        first, lines = run("first")
        records = [json.loads(line) for line in lines]  # every line is one complete JSON record
        assert len(records) == n and sorted(r["sample_id"] for r in records) == sorted(
            r["id"] for r in rows
        )
        assert all(r["error"] is None and r["grades"]["judge"]["score"] == 1.0 for r in records)
        assert fake.max_in_flight >= 100
        assert fake.count(CHAT) == 2 * distinct  # identical requests in flight share one call
        assert first["cache"]["hits"] == 2 * (n - distinct)
        entries = sorted((tmp_path / "cache").rglob("*.json"))
        assert len(entries) == 2 * distinct and not list((tmp_path / "cache").rglob("*.tmp"))
        assert all("choices" in json.loads(p.read_text(encoding="utf-8")) for p in entries)

        second, lines2 = run("second")
        assert fake.count(CHAT) == 2 * distinct  # nothing new: every call came from the cache
        assert second["cache"]["hits"] == 2 * n
        assert second["metrics"] == first["metrics"] and second["usage"]["total"] == {
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }
        again = {r["sample_id"]: r["submission"] for r in map(json.loads, lines2)}
        assert again == {r["sample_id"]: r["submission"] for r in records}
        assert len(sorted((tmp_path / "cache").rglob("*.json"))) == 2 * distinct
