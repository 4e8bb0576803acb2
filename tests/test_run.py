"""End-to-end runs of replay/command/http suites: scores, gates, errors, outputs, exit codes."""

from __future__ import annotations

import json
import sys

from tests.conftest import replay_suite

DATA = [{"id": i, "input": f"q{i}", "ground_truth": "yes"} for i in range(4)]
OUTS = [
    {"id": 0, "output": "yes"},
    {"id": 1, "output": "YES sir"},
    {"id": 2, "output": "no"},
    {"id": 3, "output": "yes"},
]
GRADERS = {
    "exact": {"kind": "tool", "function": "exact_match"},
    "has": {"kind": "tool", "function": "contains"},
}


def make(sd, gate, data=DATA, outs=OUTS, graders=GRADERS, **extra):
    sd.write("dataset.jsonl", data)
    sd.write("outputs.jsonl", outs)
    sd.suite(replay_suite(graders, gate, **extra))


def test_summary_contract_and_exact_aggregates(sd):
    make(sd, {"metric_key": "exact", "op": "gte", "value": 0.5})
    assert sd.run() == 0
    s = sd.summary()
    assert s["schema_version"] == 1 and s["suite"] == "t" and s["partial"] is False
    assert s["gate"] == {"passed": True}
    g = s["gates"][0]
    assert {
        k: g[k] for k in ("metric_key", "metric", "op", "value", "actual", "passed", "status")
    } == {
        "metric_key": "exact",
        "metric": "avg_score",
        "op": "gte",
        "value": 0.5,
        "actual": 0.5,
        "passed": True,
        "status": "passed",
    }
    m = s["metrics"]["exact"]
    assert {
        k: m[k]
        for k in ("n", "graded", "errors", "mean", "pass_rate", "min", "max", "median", "p95")
    } == {
        "n": 4,
        "graded": 4,
        "errors": 0,
        "mean": 0.5,
        "pass_rate": 0.5,
        "min": 0.0,
        "max": 1.0,
        "median": 0.5,
        "p95": 1.0,
    }
    assert s["metrics"]["has"]["mean"] == 0.75
    assert s["n_samples"] == 4 and s["errors"]["total"] == 0


def test_results_lines_follow_the_contract(sd):
    make(sd, {"metric_key": "exact", "op": "gte", "value": 0.5})
    sd.run()
    rows = sorted(sd.results(), key=lambda r: r["sample_id"])
    assert len(rows) == 4
    r = rows[1]
    assert (r["sample_id"], r["run"], r["error"]) == (1, 0, None)
    assert r["grades"]["exact"] == {
        "score": 0.0,
        "passed": False,
        "rationale": "Exact match: false",
        "error": None,
        "metadata": {},
    }
    assert r["grades"]["has"]["score"] == 1.0 and r["grades"]["has"]["passed"] is True
    assert r["submission"] == {"exact": "YES sir", "has": "YES sir"}


def test_gate_below_threshold_exits_1(sd):
    make(sd, {"metric_key": "exact", "op": "gte", "value": 0.75})
    assert sd.run() == 1
    assert sd.summary()["gates"][0]["status"] == "failed"


def test_accuracy_gate_uses_fraction_and_pass_value(sd):
    make(sd, {"metric_key": "has", "metric": "accuracy", "op": "gte", "value": 0.75})
    assert sd.run() == 0
    assert sd.summary()["gates"][0]["actual"] == 0.75


def test_missing_recorded_output_is_a_counted_error(sd):
    make(sd, {"metric_key": "has", "op": "gte", "value": 0.5}, outs=OUTS[:3])
    assert sd.run() == 1  # one errored sample, and the gate's budget is max_errors 0
    s = sd.summary()
    m = s["metrics"]["has"]
    assert (m["n"], m["graded"], m["errors"], m["passed"]) == (4, 3, 1, 2)
    assert m["mean"] == 2 / 3  # over the graded samples only
    assert m["pass_rate"] == 0.5  # the errored sample counts as failed
    msg = "no recorded output for sample id 3 in outputs.jsonl"
    assert s["errors"] == {
        "total": 1,
        "samples": 1,
        "by_category": {"target": 1, "extraction": 0, "grading": 0},
        "groups": [{"category": "target", "grader": None, "message": msg, "count": 1}],
    }
    assert (s["verdict"], s["gates"][0]["status"], s["gates"][0]["reason"]) == (
        "errored",
        "errored",
        "1 of 4 samples errored (max_errors 0)",
    )
    bad = [r for r in sd.results() if r["sample_id"] == 3][0]
    assert bad["error"] == {"category": "target", "message": msg}
    assert bad["grades"]["has"]["score"] is None and bad["grades"]["has"]["passed"] is False


def test_an_error_within_the_budget_passes_on_the_graded_samples(sd):
    make(sd, {"metric_key": "has", "op": "gte", "value": 0.5, "max_errors": 1}, outs=OUTS[:3])
    assert sd.run() == 0
    g = sd.summary()["gates"][0]
    assert (g["status"], g["actual"], g["reason"]) == (
        "passed",
        2 / 3,
        "avg_score 0.6667 >= 0.5; 1 of 4 samples errored (within max_errors 1)",
    )


def test_errors_fail_a_gate_that_scores_alone_would_pass(sd):
    make(
        sd,
        {"metric_key": "has", "metric": "min", "op": "gte", "value": 1.0},
        outs=[{"id": i, "output": "yes"} for i in range(3)],
    )
    assert sd.run() == 1


def test_grader_raising_or_out_of_range_is_a_grading_error(sd):
    sd.write(
        "g.py",
        "from ci_evals import grader, GradeResult\n\n@grader\ndef boom(sample, submission):\n"
        "    if submission == 'no':\n        raise ValueError('bad')\n"
        "    return GradeResult(score=1.5 if submission == 'YES sir' else 1.0)\n",
    )
    make(sd, {"op": "gte", "value": 0.1}, graders={"b": {"kind": "tool", "function": "g.py:boom"}})
    sd.run()
    rows = {r["sample_id"]: r["grades"]["b"] for r in sd.results()}
    assert rows[2]["error"] == "grader 'g.py:boom' raised ValueError: bad"
    assert rows[1]["error"] == "grader 'g.py:boom' returned score 1.5, outside [0, 1]"
    assert rows[0]["error"] is None and rows[0]["score"] == 1.0
    assert sd.summary()["errors"]["by_category"]["grading"] == 2


def test_results_file_is_truncated_between_runs(sd):
    make(sd, {"metric_key": "has", "op": "gte", "value": 0.5})
    sd.run()
    sd.run()
    assert len(sd.results()) == 4


def test_num_runs_reduces_per_sample_and_reports_flaky(sd):
    sd.write(
        "g.py",
        "from ci_evals import grader, GradeResult\nimport itertools\n_c = itertools.count()\n\n"
        "@grader\ndef alternate(sample, submission):\n"
        "    return GradeResult(score=float(next(_c) % 2))\n",
    )
    make(
        sd,
        {"op": "gte", "value": 0.5},
        data=DATA[:1],
        outs=OUTS[:1],
        graders={"alt": {"kind": "tool", "function": "g.py:alternate"}},
        num_runs=4,
        max_concurrent=1,
    )
    assert sd.run() == 0
    s = sd.summary()
    assert len(sd.results()) == 4
    assert s["metrics"]["alt"]["mean"] == 0.5 and s["metrics"]["alt"]["n"] == 1
    assert s["flaky"] == [
        {"sample_id": "0", "model": None, "metric": "alt", "passes": 2, "runs": 4}
    ]


def test_cli_overrides_yaml(sd):
    make(sd, {"metric_key": "has", "op": "gte", "value": 0.5}, max_samples=1)
    sd.run("--max-samples", "3")
    assert sd.summary()["n_samples"] == 3


def test_command_target_runs_program_per_sample(sd):
    sd.write(
        "agent.py",
        "import json, sys\ns = json.load(sys.stdin)\n"
        "if s['id'] == 2:\n    print('boom', file=sys.stderr)\n    sys.exit(3)\n"
        "print(json.dumps({'output': s['input'].upper()}))\n",
    )
    sd.write(
        "dataset.jsonl", [{"id": i, "input": f"q{i}", "ground_truth": f"Q{i}"} for i in range(3)]
    )
    sd.suite(
        {
            "name": "cmd",
            "dataset": "dataset.jsonl",
            "target": {"kind": "command", "command": [sys.executable, "agent.py"]},
            "graders": {"e": {"kind": "tool", "function": "exact_match"}},
            "gate": {"op": "gte", "value": 0.5, "max_errors": 1},
        }
    )
    assert sd.run() == 0
    rows = {r["sample_id"]: r for r in sd.results()}
    assert rows[0]["submission"]["e"] == "Q0" and rows[0]["grades"]["e"]["score"] == 1.0
    assert rows[2]["error"] == {
        "category": "target",
        "message": "command exited with code 3; stderr: boom",
    }


def test_command_timeout_is_a_sample_error(sd):
    sd.write("slow.py", "import time\ntime.sleep(30)\n")
    sd.write("dataset.jsonl", [{"input": "q", "ground_truth": "a"}])
    sd.suite(
        {
            "name": "slow",
            "dataset": "dataset.jsonl",
            "target": {"kind": "command", "command": [sys.executable, "slow.py"], "timeout": 0.3},
            "graders": {"e": {"kind": "tool", "function": "exact_match"}},
            "gate": {"op": "gte", "value": 0.5},
        }
    )
    assert sd.run() == 1
    assert sd.results()[0]["error"]["message"] == "command timed out after 0.3 s; stderr: "


def test_http_target_posts_samples(sd, monkeypatch):
    from pytest_httpserver import HTTPServer
    from werkzeug import Response

    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    try:

        def handler(request):
            assert request.headers["Authorization"] == "Bearer s3cret"
            body = request.get_json()
            if body["id"] == 1:
                return Response("overloaded", status=503)
            return Response(
                json.dumps({"messages": [{"role": "assistant", "content": body["input"] + "!"}]}),
                content_type="application/json",
            )

        server.expect_request("/agent", method="POST").respond_with_handler(handler)
        monkeypatch.setenv("AGENT_TOKEN", "s3cret")
        sd.write(
            "dataset.jsonl",
            [{"id": 0, "input": "hi", "ground_truth": "hi!"}, {"id": 1, "input": "x"}],
        )
        sd.suite(
            {
                "name": "http",
                "dataset": "dataset.jsonl",
                "target": {
                    "kind": "http",
                    "url": server.url_for("/agent"),
                    "headers": {"Authorization": {"env": "AGENT_TOKEN", "prefix": "Bearer "}},
                },
                "graders": {"e": {"kind": "tool", "function": "exact_match"}},
                "gate": {"op": "gte", "value": 0.5},
            }
        )
        assert sd.run("--max-errors", "1") == 0
        rows = {r["sample_id"]: r for r in sd.results()}
        assert rows[0]["grades"]["e"]["score"] == 1.0
        assert rows[1]["error"] == {
            "category": "target",
            "message": "HTTP target returned 503: overloaded",
        }
        assert "s3cret" not in (sd.root / "out" / "results.jsonl").read_text()
    finally:
        server.stop()


def test_replay_accepts_openai_chat_shape_with_tool_calls(sd):
    msgs = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "It is"}, {"type": "text", "text": "sunny."}],
        },
    ]
    sd.write("dataset.jsonl", [{"id": "w", "input": "weather?", "ground_truth": "Paris"}])
    sd.write("outputs.jsonl", [{"id": "w", "messages": msgs}])
    sd.suite(
        replay_suite(
            {
                "args": {
                    "kind": "tool",
                    "function": "contains",
                    "extractor": "tool_arguments",
                    "extractor_config": {"tool_name": "get_weather"},
                },
                "out": {
                    "kind": "tool",
                    "function": "ascii_printable_only",
                    "extractor": "tool_output",
                    "extractor_config": {"tool_name": "get_weather"},
                },
                "final": {"kind": "tool", "function": "contains", "extractor": "last_assistant"},
            },
            {"metric_key": "args", "op": "gte", "value": 1},
        )
    )
    assert sd.run() == 0
    r = sd.results()[0]
    assert r["submission"] == {"args": '{"city": "Paris"}', "out": "sunny", "final": "It is sunny."}
    assert r["grades"]["final"]["score"] == 0.0


def test_several_suites_by_glob_give_one_exit_code(sd):
    make(sd, {"metric_key": "exact", "op": "gte", "value": 0.5})
    spec = replay_suite(GRADERS, {"metric_key": "exact", "op": "gte", "value": 0.9})
    spec["name"] = "strict"
    sd.suite(spec, name="suite-strict.yaml")
    from ci_evals.cli.app import main

    rc = main(
        ["run", str(sd.root / "suite*.yaml"), "--output", str(sd.root / "all"), "-q", "--no-cache"]
    )
    assert rc == 1
    rows = json.loads((sd.root / "all" / "suites.json").read_text())
    assert [(r["suite"], r["passed"], r["exit_code"]) for r in rows] == [
        ("strict", False, 1),
        ("t", True, 0),
    ]
    assert (sd.root / "all" / "suite" / "summary.json").exists()
    assert (sd.root / "all" / "suite-strict" / "summary.json").exists()
    combined = (sd.root / "all" / "summary.md").read_text()
    first, second = combined.split("\n\n---\n\n")
    assert first.startswith(
        "## ❌ ci-evals · strict: failed\n\n**Verdict: failed**: exact: avg_score 0.5000, "
        "needs &gt;= 0.9\n"
    )
    assert second.startswith(
        "## ✅ ci-evals · t: passed\n\n**Verdict: passed**: 1 of 1 gates passed\n"
    )
    assert [r["verdict"] for r in rows] == ["failed", "passed"]


def test_missing_api_key_is_a_configuration_error_naming_the_suite(sd, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    sd.write("dataset.jsonl", [{"input": "q"}])
    sd.suite(
        {
            "name": "m",
            "dataset": "dataset.jsonl",
            "target": {"kind": "model", "model": "gpt-4o-mini"},
            "graders": {"e": {"kind": "tool", "function": "ascii_printable_only"}},
            "gate": {"op": "gte", "value": 1},
        }
    )
    assert sd.run() == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {sd.root / 'suite.yaml'}:3: target: OPENAI_API_KEY is not set; set it, or point base_url / "
        "OPENAI_BASE_URL at an OpenAI-compatible server"
    )
