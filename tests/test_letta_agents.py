"""Agents on a Letta server (fake): import retries, the ledger of leftover and kept agents and how it
is reported, queued_s for a shared agent, and the failures a real server has that the fake copies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals._util import retry
from ci_evals._util.errors import SampleError
from ci_evals.letta import retries as letta_retries
from ci_evals.reports.comment import render_comment
from ci_evals.reports.letta_agents import comment_lines, console_lines, delete_command
from tests.fakes.backoff import watch_letta_backoff
from tests.fakes.letta_server import (  # noqa: F401 - letta_fake_fixture provides `letta_fake`
    SUBMIT_GRADE,
    agent_file,
    close_ledger,
    letta_fake_fixture,
    write_agent_file,
)
from tests.test_letta_target import make, run, sample


@pytest.fixture(autouse=True)
def _no_import_backoff(monkeypatch):
    monkeypatch.setattr(letta_retries, "IMPORT_BACKOFF", 0.0)


def _cli(args):
    from ci_evals.cli.app import main

    return main(args)


def write_suite(
    tmp_path: Path, url: str, *, n: int = 2, target: str = "", judge: bool = False
) -> Path:
    write_agent_file(tmp_path / "echo.af", agent_file("echo-agent", blocks={"human": ""}))
    write_agent_file(tmp_path / "judge.af", agent_file("judge", tools=[SUBMIT_GRADE]))
    rows = [
        {"id": f"s{i}", "input": f"question {i}", "ground_truth": f"question {i}"} for i in range(n)
    ]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    graders = "  echo:\n    kind: tool\n    function: contains\n    extractor: last_assistant\n"
    if judge:
        graders += (
            "  judge:\n    kind: rubric\n    agent_file: judge.af\n    prompt: Grade it.\n"
            f"    extractor: last_assistant\n    base_url: {url}\n"
        )
    (tmp_path / "suite.yaml").write_text(
        f"name: agents\ndataset: data.jsonl\ntarget:\n  kind: agent\n  base_url: {url}\n"
        f"{target or '  agent_file: echo.af'}\ngraders:\n{graders}"
    )
    return tmp_path / "suite.yaml"


# -- the fake fails where a real Letta 0.16.8 fails ----------------------------------------------


def test_a_hand_written_af_without_its_system_message_errors_every_sample(letta_fake, tmp_path):
    path = write_agent_file(tmp_path / "bare.af", agent_file("bare", with_messages=False))
    with pytest.raises(SampleError) as err:
        run(make(letta_fake, tmp_path, agent_file=str(path)), sample("hi"))
    agent = letta_fake.created[0]
    assert str(err.value) == (
        f"Letta agent run failed: Letta returned HTTP 500 for POST /v1/agents/{agent}/messages: "
        "An unknown error occurred"
    )
    assert letta_fake.live() == []


def test_an_imported_agent_is_named_like_the_af(letta_fake, tmp_path):
    [traj] = run(make(letta_fake, tmp_path), sample("hi"))
    assert letta_fake.agents == {}
    assert letta_fake.imports == [
        {"override_name": "echo-agent", "override_existing_tools": "false"}
    ]  # else echo-agent_copy


def test_deadlocked_imports_are_retried_counted_and_leave_nothing(letta_fake, tmp_path):
    letta_fake.deadlock_imports(times=3)
    [traj] = run(make(letta_fake, tmp_path), sample("hi"))
    assert traj.metadata["retries"] == 3
    assert letta_fake.count("POST", "/v1/agents/import") == 4
    assert letta_fake.live() == []


def test_an_import_that_keeps_deadlocking_is_one_target_error(letta_fake, tmp_path):
    letta_fake.deadlock_imports(times=100)
    with pytest.raises(SampleError) as err:
        run(make(letta_fake, tmp_path, max_retries=2, retry_backoff=0), sample("hi"))
    assert str(err.value).startswith(
        "Letta agent run failed: Letta returned HTTP 400 for POST /v1/agents/import: "
        "Import failed: (sqlalchemy.dialects.postgresql.asyncpg.Error) deadlock detected"
    )
    assert err.value.retries == 5
    assert (
        letta_fake.count("POST", "/v1/agents/import") == 6
    )  # no fresh attempt after the import's own retries


def test_import_retries_follow_the_shared_backoff_jittered_capped_and_bounded(
    letta_fake, tmp_path, monkeypatch
):
    watched = watch_letta_backoff(monkeypatch)
    monkeypatch.setattr(letta_retries, "IMPORT_BACKOFF", 0.25)
    monkeypatch.setattr(letta_retries, "IMPORT_BACKOFF_CAP", 1.0)
    letta_fake.deadlock_imports(times=100)
    with pytest.raises(SampleError) as err:
        run(make(letta_fake, tmp_path, max_retries=2, retry_backoff=1.0), sample("hi"))
    assert err.value.retries == 5
    assert letta_fake.count("POST", "/v1/agents/import") == 6  # IMPORT_TRIES bounds it
    assert watched.bounds() == [0.25, 0.5, 1.0, 1.0, 1.0]  # doubling, capped
    assert watched.slept == watched.rng.drawn  # each wait drawn from [bound / 2, bound]
    assert watched.slept != watched.bounds()  # jittered, not the bound itself


def test_an_import_waits_for_the_servers_retry_after(letta_fake, tmp_path, monkeypatch):
    watched = watch_letta_backoff(monkeypatch)
    letta_fake.fail("POST", "/v1/agents/import", status=429, headers={"Retry-After": "3"})
    [traj] = run(make(letta_fake, tmp_path), sample("hi"))
    assert traj.metadata["retries"] == 1
    assert watched.slept == [3.0]  # the import's own bound here is 0 s (the fixture)


def test_the_import_policy_defaults():
    policy = letta_retries.import_backoff()
    assert (policy.base, policy.cap, policy.max_retries) == (0.0, 4.0, 5)  # base: the fixture's
    assert (policy.max_retry_after, policy.clamp_retry_after) == (60.0, True)
    attempts = retry.attempt_backoff(1.5, 2)
    assert (attempts.base, attempts.cap, attempts.max_retries) == (1.5, 30.0, 2)
    assert (attempts.max_retry_after, attempts.clamp_retry_after) == (60.0, True)


def test_retries_of_target_and_judge_are_counted_in_the_summary(letta_fake, tmp_path):
    letta_fake.deadlock_imports(times=2)
    out = tmp_path / "out"
    rc = _cli(
        [
            "run",
            str(write_suite(tmp_path, letta_fake.url, n=1, judge=True)),
            "--output",
            str(out),
            "--max-concurrent",
            "1",
        ]
    )
    summary = json.loads((out / "summary.json").read_text())
    assert (rc, summary["errors"]["total"], summary["retries"]) == (0, 0, 2)
    assert "letta" not in summary


# -- leftover and kept agents ------------------------------------------------------------------------


def test_agents_whose_delete_fails_are_reported_everywhere(letta_fake, tmp_path, capsys):
    letta_fake.fail("DELETE", r"/v1/agents/.*", status=503, times=1000, detail="maintenance")
    out = tmp_path / "out"
    rc = _cli(
        [
            "run",
            str(write_suite(tmp_path, letta_fake.url)),
            "--output",
            str(out),
            "--dry-run",
            "--max-concurrent",
            "1",
        ]
    )
    summary = json.loads((out / "summary.json").read_text())
    ids = letta_fake.created
    why = "Letta returned HTTP 503 for DELETE /v1/agents/{}: maintenance"
    assert rc == 0 and len(ids) == 2 and letta_fake.live() == ids
    assert summary["letta"] == {
        "leftover_agents": [
            {"id": i, "name": "echo-agent", "error": why.format(i)} for i in sorted(ids)
        ],
        "kept_agents": [],
        "base_url": letta_fake.url,
    }
    printed = capsys.readouterr().out
    command = delete_command(letta_fake.url, sorted(ids))
    assert (
        f"Letta: 2 agent(s) the run created could not be deleted; still on {letta_fake.url}:\n"
        f"  {sorted(ids)[0]} (echo-agent): {why.format(sorted(ids)[0])}\n"
    ) in printed
    assert f"  delete them: {command}\n" in printed
    comment = printed.split("--- PR comment (dry run: not posted) ---")[1]
    assert "⚠️ **2 Letta agent(s) could not be deleted**" in comment
    assert f"```sh\n{command}\n```" in comment


def test_the_ledger_deletes_eight_agents_at_a_time_and_reports_the_ones_that_stay(letta_fake):
    from ci_evals.letta.agents import DELETES_AT_ONCE, AgentLedger

    ids = [letta_fake.add_agent(f"a{i}") for i in range(18)]
    letta_fake.fail("DELETE", r"/v1/agents/.*", status=None, times=16, hang=0.4)  # answered late
    letta_fake.fail("DELETE", r"/v1/agents/.*", status=503, times=4, detail="busy")  # 2 agents
    ledger = AgentLedger(letta_fake.url)
    ledger.add(ids, "echo")

    took = close_ledger(ledger)
    # 16 late answers, 8 at a time: two waves of 0.4 s (one by one: 6.4 s)
    assert DELETES_AT_ONCE == 8 and 0.75 < took < 2.5, f"{took:.2f} s"
    left = sorted(letta_fake.agents)
    assert len(left) == 2 and set(left) <= set(ids)
    assert ledger.report()["leftover_agents"] == [
        {
            "id": i,
            "name": "echo",
            "error": f"Letta returned HTTP 503 for DELETE /v1/agents/{i}: busy",
        }
        for i in left
    ]


def test_the_delete_command_deletes_the_agents(letta_fake, tmp_path):
    import subprocess

    ids = [letta_fake.add_agent("a"), letta_fake.add_agent("b")]
    cmd = delete_command(letta_fake.url, ids)
    done = subprocess.run(
        ["bash", "-c", cmd],
        env={"PATH": "/usr/bin:/bin", "LETTA_API_KEY": "k"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert letta_fake.agents == {}
    assert {h.get("authorization") for h in letta_fake.headers} == {"Bearer k"}


def test_ids_from_the_server_cannot_inject_into_the_command_or_the_comment():
    summary = {
        "letta": {
            "leftover_agents": [{"id": "x; rm -rf ~ `y`", "name": "<b>@team</b>", "error": "e"}],
            "kept_agents": [],
            "base_url": "http://h:1",
        }
    }
    cmd = delete_command("http://h:1", ["x; rm -rf ~ `y`"])
    assert cmd.startswith("for id in 'x; rm -rf ~ `y`'; do curl ")  # one single-quoted word
    text = "\n".join(comment_lines(summary))
    assert "<b>" not in text and "@team" not in text
    assert (
        "\n- x; rm -rf \\~ \\`y\\` (&lt;b&gt;@\u200dteam&lt;/b&gt;): e" in text
    )  # escaped, the mention broken


def test_kept_agents_are_printed_with_their_ids(letta_fake, tmp_path, capsys):
    out = tmp_path / "out"
    suite = write_suite(tmp_path, letta_fake.url, target="  agent_file: echo.af\n  cleanup: false")
    assert _cli(["run", str(suite), "--output", str(out), "--max-concurrent", "1", "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    ids = letta_fake.created
    assert summary["letta"]["kept_agents"] == [{"id": i, "name": "echo-agent"} for i in ids]
    assert summary["letta"]["leftover_agents"] == []
    printed = capsys.readouterr().out
    assert (
        f"Letta: 2 agent(s) kept on {letta_fake.url} (cleanup: false):\n  {ids[0]} (echo-agent)\n"
        in printed
    )
    assert comment_lines(summary) == [
        f"2 Letta agent(s) kept (`cleanup: false`): {ids[0]}, {ids[1]}",
        "",
    ]


def test_the_comment_lists_leftovers_beside_the_results():
    summary = {
        "suite": "s",
        "gate": {"passed": True},
        "gates": [],
        "metrics": {},
        "errors": {"total": 0},
        "letta": {
            "leftover_agents": [{"id": "agent-1", "name": "j", "error": "gone"}],
            "kept_agents": [],
            "base_url": "http://127.0.0.1:8283",
        },
    }
    body = render_comment(summary, [], run_url=None, marker_key="s")
    assert "- agent-1 (j): gone" in body


def test_nothing_is_printed_when_nothing_was_left():
    assert console_lines({}) == [] and comment_lines({"letta": None}) == []


# -- honest durations ----------------------------------------------------------------------------


def test_time_waiting_for_a_shared_agent_is_queued_s_not_duration_s(letta_fake, tmp_path):
    agent = letta_fake.add_agent()
    import time

    original = letta_fake._respond

    def slow(a, text):
        time.sleep(0.3)
        return original(a, text)

    letta_fake._respond = slow
    out = tmp_path / "out"
    suite = write_suite(tmp_path, letta_fake.url, n=4, target=f"  agent_id: {agent}")
    assert _cli(["run", str(suite), "--output", str(out), "--max-concurrent", "4", "--quiet"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    durations = sorted(r["duration_s"] for r in rows)
    queued = sorted(r.get("queued_s", 0.0) for r in rows)
    assert all(0.3 <= d < 0.9 for d in durations), durations  # each its own 0.3 s, not the queue
    assert queued[0] < 0.1 and queued[-1] >= 0.85, queued  # the last waited for three others
