"""Fault injection over real HTTP: the run always completes and no sample is lost.

The OpenAI-compatible fake (model target + rubric/score_model judges), the Letta fake (agent target)
and the GitHub fake (PR comment) inject 429 with Retry-After, 500, connection resets, hangs past the
timeout, malformed JSON and truncated bodies at seeded rates up to 30 %. Every run must finish with
one result row per sample, each graded or errored with its cause; errors counted by category in
summary.json, summary.md, junit.xml and the PR comment; retries bounded by ``max_retries`` and
reported in summary.json ``retries``.
"""

from __future__ import annotations

import json
import random
import re
import threading
import xml.etree.ElementTree as ET
from collections import Counter
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

import ci_evals.llm.client
from tests.fakes.github_server import FakeGitHub
from tests.fakes.github_server import start as start_github
from tests.fakes.letta_server import (
    FakeLetta,
    _handler,
    agent_file,
    letta_fake_fixture,  # noqa: F401 (fixture)
    write_agent_file,
)
from tests.fakes.openai_server import CHAT, FakeOpenAI

CAUSES = re.compile(
    r"HTTP 429|HTTP 500|HTTP 502|connection failed|dropped|nothing listens|timed out|not valid JSON|Letta returned HTTP|"
    r"Letta request timed out|cannot reach the Letta server"
)
MAX_RETRIES = 2


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    """Exponential backoff starts at 10 ms instead of 0.5 s (the retry logic itself is unchanged)."""
    monkeypatch.setattr(ci_evals.llm.client, "BACKOFF_BASE", 0.01)


@pytest.fixture
def fake_openai(monkeypatch):
    server = FakeOpenAI(seed=1234)
    server.start()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-faults-000000")
    yield server
    server.stop()


def dataset(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"s{i}", "input": f"The answer is w{i}", "ground_truth": f"w{i}"} for i in range(n)
    ]


def llm_suite(
    *, timeout: float = 0.5, judge: str = "rubric", max_concurrent: int = 8
) -> dict[str, Any]:
    common = {"timeout": timeout, "max_retries": MAX_RETRIES}
    if judge == "rubric":
        grader = {
            "kind": "rubric",
            "prompt": "Does the submission give the expected answer?",
            **common,
        }
    else:
        grader = {
            "type": "score_model",
            "name": "judge",
            "model": "gpt-4o-mini",
            **common,
            "input": [
                {
                    "role": "user",
                    "content": "Expected: {{ item.ground_truth }}. Got: {{ sample.output_text }}",
                }
            ],
        }
    return {
        "name": "faults",
        "dataset": "dataset.jsonl",
        "max_concurrent": max_concurrent,
        "cache": False,
        "target": {"kind": "model", "model": "gpt-4o-mini", **common},
        "graders": {"judge": grader},
        "gate": {"op": "gte", "value": 0.5},
    }


def run_suite(sd, spec: dict[str, Any], data: list[dict[str, Any]]) -> tuple[int, dict, list[dict]]:
    sd.write("dataset.jsonl", data)
    sd.suite(spec)
    rc = sd.run()
    return rc, sd.summary(), sd.results()


def check_invariants(sd, rc: int, summary: dict, rows: list[dict], data: list[dict]) -> Counter:
    """Nothing lost, every row graded or errored with a cause, counts agree in every report."""
    assert rc in (0, 1)
    assert summary["partial"] is False
    assert len(rows) == len(data) == summary["records"]
    assert sorted(r["sample_id"] for r in rows) == sorted(d["id"] for d in data)
    cats: Counter = Counter()
    for r in rows:
        if r["error"]:
            assert r["error"]["category"] in ("target", "extraction", "grading")
            assert CAUSES.search(r["error"]["message"]), r["error"]["message"]
            cats[r["error"]["category"]] += 1
            assert all(
                g["error"] and g["score"] is None and g["passed"] is False
                for g in r["grades"].values()
            )
            continue
        for g in r["grades"].values():
            if g["error"]:
                assert CAUSES.search(g["error"]) or g.get("error_category") == "extraction", g[
                    "error"
                ]
                cats[g.get("error_category", "grading")] += 1
                assert g["score"] is None and g["passed"] is False
            else:
                assert g["score"] == 1.0  # the judge finds the echoed answer
        retries = r.get("retries") or 0
        assert 0 <= retries <= MAX_RETRIES
        for g in r["grades"].values():
            assert 0 <= (g["metadata"].get("retries") or 0) <= MAX_RETRIES
    by_cat = {"target": 0, "extraction": 0, "grading": 0} | dict(cats)
    assert {k: summary["errors"][k] for k in ("total", "by_category")} == {
        "total": sum(cats.values()),
        "by_category": by_cat,
    }
    reported = sum(
        (r.get("retries") or 0)
        + sum(g["metadata"].get("retries") or 0 for g in r["grades"].values())
        for r in rows
    )
    assert summary["retries"] == reported
    md = (sd.root / "out" / "summary.md").read_text(encoding="utf-8")
    if cats:
        listed = ", ".join(f"{k} {v}" for k, v in by_cat.items() if v)
        n = sum(cats.values())  # one grader: one errored grade per errored sample
        assert (
            f"{n} errored sample{'s' if n != 1 else ''} (no score, counted as failed): {listed}"
            in md
        )
    else:
        assert "**Errors:**" not in md
    return cats


def logical_calls(rows: list[dict]) -> int:
    """Chat calls the run meant to make: one target call per sample, one judge call per answered sample."""
    return len(rows) + sum(1 for r in rows if not r["error"])


# ---------------------------------------------------------------- OpenAI-compatible endpoint

FAULTS = [
    ("429", {"retry_after": "0"}),
    ("500", {}),
    ("reset", {}),
    ("hang", {"hang_s": 2.0}),
    ("malformed", {}),
    ("truncated", {}),
]


@pytest.mark.parametrize(("kind", "opts"), FAULTS, ids=[k for k, _ in FAULTS])
def test_each_fault_kind_at_30_percent(sd, fake_openai, kind, opts):
    data = dataset(12)
    fake_openai.fault(kind, rate=0.3, **opts)
    rc, summary, rows = run_suite(sd, llm_suite(timeout=0.3), data)
    check_invariants(sd, rc, summary, rows, data)
    requests = fake_openai.count(CHAT)
    assert requests > logical_calls(rows)  # faults happened and were retried
    if kind == "429":  # a wait, not a retry: no sample errors for it, the endpoint counts them
        assert summary["errors"]["total"] == 0 and summary["retries"] == 0
        assert summary["endpoints"][0]["rejected"] == requests - logical_calls(rows) >= 1
        return
    assert summary["retries"] >= 1
    # Nothing is retried without bound: at most 1 + max_retries attempts per logical call.
    assert requests <= logical_calls(rows) * (1 + MAX_RETRIES)


def test_mixed_faults_30_percent_with_score_model_judge(sd, fake_openai):
    data = dataset(40)
    for kind, opts in FAULTS:  # six kinds at 5 % each: 30 % of requests fail
        fake_openai.fault(kind, rate=0.05, **opts)
    rc, summary, rows = run_suite(
        sd, llm_suite(timeout=0.3, judge="score_model", max_concurrent=10), data
    )
    cats = check_invariants(sd, rc, summary, rows, data)
    assert set(cats) <= {"target", "grading"}
    assert fake_openai.count(CHAT) <= logical_calls(rows) * (1 + MAX_RETRIES)
    assert summary["retries"] >= 5


def test_every_retry_is_counted_even_for_calls_that_fail_for_good(sd, fake_openai):
    """summary.retries + the calls the run meant to make == the requests the server saw."""
    data = dataset(6)
    fake_openai.fault(
        "500", first=3 * (1 + MAX_RETRIES)
    )  # the first three target calls fail for good
    rc, summary, rows = run_suite(sd, llm_suite(max_concurrent=1), data)
    check_invariants(sd, rc, summary, rows, data)
    assert [r["sample_id"] for r in rows if r["error"]] == ["s0", "s1", "s2"]
    assert rows[0]["error"]["message"].endswith("HTTP 500: injected 500 (after 2 retries)")
    assert summary["errors"]["by_category"] == {"target": 3, "extraction": 0, "grading": 0}
    assert fake_openai.count(CHAT) == 6 + 3 + 3 * MAX_RETRIES
    assert summary["retries"] == fake_openai.count(CHAT) - logical_calls(rows) == 6


def test_retry_after_is_honoured_and_counted(sd, fake_openai):
    fake_openai.fault("429", first=2, retry_after="0.2")
    rc, summary, rows = run_suite(sd, llm_suite(max_concurrent=1), dataset(1))
    # two 429s: waits the sample sat out (throttled), not retries of its budget
    assert (
        rc == 0
        and rows[0]["error"] is None
        and rows[0]["throttled"] == 2
        and "retries" not in rows[0]
    )
    times = [r.at for r in fake_openai.requests if r.path == CHAT]
    assert len(times) == 4  # 429, 429, target answer, judge answer
    assert times[1] - times[0] >= 0.19 and times[2] - times[1] >= 0.19
    assert (summary["retries"], summary["endpoints"][0]["rejected"]) == (0, 2)


def test_judge_failing_for_good_is_a_grading_error_with_cause(sd, fake_openai):
    data = dataset(3)
    calls = {"n": 0}

    def responder(
        body,
    ):  # the judge (JSON mode) gets a reply with no score: not retried, an error grade
        if (body.get("response_format") or {}).get("type") == "json_object":
            calls["n"] += 1
            return {"verdict": "fine"}
        return body["messages"][-1]["content"]

    fake_openai.responder = responder
    rc, summary, rows = run_suite(sd, llm_suite(), data)
    assert rc == 1 and len(rows) == 3 and calls["n"] == 3
    assert all(
        r["error"] is None
        and r["grades"]["judge"]["error"] == "judge reply has no 'score' (keys: verdict)"
        for r in rows
    )
    assert summary["errors"]["by_category"] == {"target": 0, "extraction": 0, "grading": 3}


def three_category_run(sd, fake_openai) -> tuple[dict, list[dict]]:
    """A target error (s0), an extraction error (s1) and a grading error (s2); s3 is fine."""
    sd.write(
        "ext.py",
        "from ci_evals import extractor\n\n@extractor\ndef faults_strict(trajectory, config):\n"
        "    text = trajectory[-1][-1].content\n"
        "    if 'w1' in text:\n        raise ValueError('cannot extract from w1')\n    return text\n",
    )
    spec = llm_suite(max_concurrent=1)
    spec["graders"]["judge"]["extractor"] = "ext.py:faults_strict"
    fake_openai.fault("500", first=1 + MAX_RETRIES)  # sample s0's target call fails for good
    base = fake_openai.responder

    def responder(body):  # the judge of s2 always answers with a broken body
        if (body.get("response_format") or {}).get("type") == "json_object" and "w2" in json.dumps(
            body
        ):
            return b"{not json"
        return base(body)

    fake_openai.responder = responder
    data = dataset(4)
    rc, summary, rows = run_suite(sd, spec, data)
    check_invariants(sd, rc, summary, rows, data)
    return summary, rows


def test_all_three_categories_reach_every_report(sd, fake_openai):
    from ci_evals.reports.comment import render_comment
    from ci_evals.reports.write import own_results

    summary, rows = three_category_run(sd, fake_openai)
    assert {k: summary["errors"][k] for k in ("total", "by_category")} == {
        "total": 3,
        "by_category": {"target": 1, "extraction": 1, "grading": 1},
    }
    by_id = {r["sample_id"]: r for r in rows}
    assert by_id["s0"]["error"]["category"] == "target"
    assert by_id["s1"]["grades"]["judge"]["error_category"] == "extraction"
    assert "cannot extract from w1" in by_id["s1"]["grades"]["judge"]["error"]
    assert "not valid JSON" in by_id["s2"]["grades"]["judge"]["error"]
    assert by_id["s3"]["grades"]["judge"]["score"] == 1.0
    comment = render_comment(
        summary, own_results(sd.root / "out" / "results.jsonl"), run_url=None, marker_key="faults"
    )
    assert (
        "3 errored samples (no score, counted as failed): target 1, extraction 1, grading 1"
        in comment
    )
    junit = ET.parse(sd.root / "out" / "junit.xml").getroot()
    assert len(list(junit.iter("error"))) == 3
    from ci_evals.reports.console import render

    assert (
        "Errors: 3 of 4 result lines errored (target 1, extraction 1, grading 1); errored samples have no "
        "score and count as failed:"
    ) in render(summary)


def test_junit_error_type_is_the_category(sd, fake_openai):
    three_category_run(sd, fake_openai)
    junit = ET.parse(sd.root / "out" / "junit.xml").getroot()
    assert sorted(e.get("type") for e in junit.iter("error")) == ["extraction", "grading", "target"]
    assert sorted(e.get("message").split(" error: ")[0] for e in junit.iter("error")) == [
        "extraction",
        "grading",
        "target",
    ]


# ---------------------------------------------------------------- Letta


MESSAGES = re.compile(r"/v1/agents/[^/]+/messages")


class FlakyLetta(FakeLetta):
    """The Letta fake with seeded rate-based faults on agent messages (on top of its ``fail`` queue)."""

    def __init__(self, rate: float, choices: list[dict[str, Any]], seed: int = 7) -> None:
        super().__init__()
        self.rate, self.choices, self.rng = rate, choices, random.Random(seed)
        self.injected: Counter = Counter()
        self._queued: list[dict[str, Any]] = []

    @property
    def _faults(self) -> list[dict[str, Any]]:
        """Read by the handler once per request, right after logging it: maybe fault a messages POST."""
        method, path = self.requests[-1] if self.requests else ("", "")
        if method != "POST" or not MESSAGES.fullmatch(path) or self.rng.random() >= self.rate:
            return self._queued
        fault = {
            "hang": None,
            **self.rng.choice(self.choices),
            "method": "POST",
            "times": 1,
            "path": MESSAGES,
        }
        self.injected["hang" if fault["hang"] else fault["status"]] += 1
        return [fault, *self._queued]

    @_faults.setter
    def _faults(self, value: list[dict[str, Any]]) -> None:
        self._queued = value


@pytest.fixture
def flaky_letta(monkeypatch):
    fake = FlakyLetta(
        0.3, [{"status": 500}, {"status": 429}, {"status": 503}, {"status": 500, "hang": 1.5}]
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("LETTA_API_KEY", "letta-test-faults-000")
    yield fake
    fake.stop_event.set()
    server.shutdown()
    server.server_close()


def test_letta_agent_target_survives_30_percent_faults(sd, flaky_letta):
    write_agent_file(sd.root / "agent.af", agent_file("echo-agent"))
    data = [{"id": i, "input": f"ping {i}", "ground_truth": f"ECHO: ping {i}"} for i in range(16)]
    sd.write("dataset.jsonl", data)
    sd.suite(
        {
            "name": "letta-faults",
            "dataset": "dataset.jsonl",
            "max_concurrent": 4,
            "target": {
                "kind": "agent",
                "agent_file": "agent.af",
                "base_url": flaky_letta.url,
                "timeout": 0.5,
                "max_retries": MAX_RETRIES,
                "retry_backoff": 0.01,
            },
            "graders": {"echo": {"kind": "tool", "function": "contains"}},
            "gate": {"op": "gte", "value": 0.5},
        }
    )
    rc = sd.run()
    summary, rows = sd.summary(), sd.results()
    assert rc in (0, 1) and len(rows) == 16
    assert sorted(r["sample_id"] for r in rows) == list(range(16))
    failed = [r for r in rows if r["error"]]
    for r in rows:
        if r["error"]:
            assert r["error"]["category"] == "target"
            assert r["error"]["message"].startswith(
                f"Letta agent run failed after {1 + MAX_RETRIES} attempts: "
            )
            assert CAUSES.search(r["error"]["message"]), r["error"]["message"]
        else:
            assert r["grades"]["echo"]["score"] == 1.0
            assert 0 <= (r.get("retries") or 0) <= MAX_RETRIES
    assert summary["errors"]["by_category"] == {
        "target": len(failed),
        "extraction": 0,
        "grading": 0,
    }
    assert summary["retries"] == sum(r.get("retries") or 0 for r in rows) >= 1
    sent = flaky_letta.count("POST", r"/v1/agents/[^/]+/messages")
    assert 16 < sent <= 16 * (1 + MAX_RETRIES)
    # Each messages POST either got an injected fault or answered; a sample succeeds on its first answer.
    injected = sum(flaky_letta.injected.values())
    assert injected == sent - (16 - len(failed))
    assert sum(r.get("retries") or 0 for r in rows if not r["error"]) == injected - len(failed) * (
        1 + MAX_RETRIES
    )
    assert flaky_letta.injected["hang"] >= 1 and flaky_letta.injected[500] >= 1
    assert flaky_letta.live() == []  # every agent of every attempt was deleted


def test_letta_retries_of_a_sample_that_fails_for_good_are_counted(sd, letta_fake):
    write_agent_file(sd.root / "agent.af", agent_file("echo-agent"))
    letta_fake.fail("POST", r"/v1/agents/[^/]+/messages", status=503, times=1 + MAX_RETRIES)
    sd.write("dataset.jsonl", [{"id": 1, "input": "ping", "ground_truth": "ECHO"}])
    sd.suite(
        {
            "name": "letta-retries",
            "dataset": "dataset.jsonl",
            "target": {
                "kind": "agent",
                "agent_file": "agent.af",
                "base_url": letta_fake.url,
                "max_retries": MAX_RETRIES,
                "retry_backoff": 0.01,
            },
            "graders": {"echo": {"kind": "tool", "function": "contains"}},
            "gate": {"op": "gte", "value": 0.5},
        }
    )
    assert sd.run() == 1
    (row,) = sd.results()
    assert row["error"]["message"].startswith(
        f"Letta agent run failed after {1 + MAX_RETRIES} attempts: Letta returned HTTP 503"
    )
    assert letta_fake.count("POST", r"/v1/agents/[^/]+/messages") == 1 + MAX_RETRIES
    assert row["retries"] == MAX_RETRIES and sd.summary()["retries"] == MAX_RETRIES


# ---------------------------------------------------------------- GitHub comment posting


def _summary_for_comment() -> dict[str, Any]:
    return {
        "suite": "faults",
        "gate": {"passed": True},
        "gates": [],
        "metrics": {},
        "num_runs": 1,
        "errors": {"total": 0, "by_category": {}},
        "usage": {},
        "versions": {"ci_evals": "0.1.0"},
    }


@pytest.mark.parametrize(
    ("fail_next", "posted"), [(0, True), (2, True), (3, True), (4, False), (9, False)]
)
def test_comment_posting_retries_502_a_bounded_number_of_times(fail_next, posted):
    from ci_evals.reports.github import upsert_pr_comment

    state = FakeGitHub(fail_next=fail_next)
    server = start_github(state)
    warnings: list[str] = []
    try:
        url = upsert_pr_comment(
            "body <!-- ci-evals:x -->",
            "<!-- ci-evals:x -->",
            token=state.token,
            repository=state.repo,
            number=7,
            api_url=state.url,
            warn=warnings.append,
            retries=3,
            backoff=0.001,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert len(state.log) <= fail_next + 2  # at most retries + 1 tries per request, GET then POST
    if posted:
        assert url and url.endswith("#issuecomment-1001") and warnings == []
        assert [c["body"] for c in state.comments[7]] == ["body <!-- ci-evals:x -->"]
    else:
        assert url is None and state.comments == {}
        assert warnings == [
            "could not post the PR comment: GET /repos/octo/widgets/issues/7/comments: "
            "HTTP 502 after 4 tries"
        ]
        assert len(state.log) == 4


def test_action_exit_code_does_not_depend_on_comment_failures(sd, monkeypatch, capsys, tmp_path):
    """A forbidden (fork) token: the comment fails with a warning, the gate's verdict stands."""
    from ci_evals.action.main import main as action_main

    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "a"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "a"}])
    sd.suite(
        {
            "name": "gh",
            "dataset": "dataset.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {"acc": {"kind": "tool", "function": "exact_match"}},
            "gate": {"op": "gte", "value": 1},
        }
    )
    state = FakeGitHub(forbidden=True)
    server = start_github(state)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 5}}), encoding="utf-8")
    env = {
        "INPUT_SUITE": str(sd.root / "suite.yaml"),
        "INPUT_OUTPUT-DIR": str(sd.root / "out"),
        "INPUT_GITHUB-TOKEN": state.token,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": state.repo,
        "GITHUB_API_URL": state.url,
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    try:
        rc = action_main([])
    finally:
        server.shutdown()
        server.server_close()
    out = capsys.readouterr().out
    assert rc == 0
    assert "::warning title=ci-evals PR comment::could not post the PR comment: POST" in out
    assert "HTTP 403" in out and state.comments == {}
    assert [r.method for r in state.log] == ["GET", "POST"]
    assert len(sd.results()) == 1


def test_results_file_is_valid_jsonl_after_faults(sd, fake_openai):
    """Every line of results.jsonl parses and carries the full record shape, errored or not."""
    fake_openai.fault("reset", rate=0.3)
    data = dataset(10)
    run_suite(sd, llm_suite(timeout=0.3), data)
    lines = (sd.root / "out" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 10
    for line in lines:
        rec = json.loads(line)
        assert {
            "sample_id",
            "run",
            "model",
            "input",
            "error",
            "grades",
            "submission",
            "usage",
            "duration_s",
        } <= set(rec)
