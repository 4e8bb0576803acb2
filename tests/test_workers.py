"""A CPU-bound run split across worker processes (ci_evals.run.lanes), the reports written by two
processes (ci_evals.reports.write), and what they rest on: dataset lanes, aggregator states
(Beside itself: tests/test_scan_beside.py).

The runs go through the CLI in a fresh process: fork is only taken with one thread, which a
pytest process that ran other tests may not have."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ci_evals.config.dataset import Dataset
from ci_evals.gating.aggregate import Aggregator
from ci_evals.run import lanes, parts
from tests.conftest import RUN_FILES, exited, in_fresh_process, replay_suite

VOLATILE = ("started_at", "finished_at", "duration_s", "workers")
GRADERS = {
    "exact": {"kind": "tool", "function": "exact_match"},
    "has": {"kind": "tool", "function": "contains"},
    "re": {"kind": "tool", "function": "regex_match", "extractor": "last_turn"},
}


HOSTILE = {
    5: "key sk-proj-" + "Ab3x" * 12 + " leaked",
    8: "lone \ud800 surrogate",
    11: "long " * 30_000,
}


def _suite(sd, n: int, **extra) -> None:
    """n samples; every 7th has no recorded output (a target error), every 3rd answers wrong; a
    secret-shaped answer, a lone surrogate and a field over the cap (HOSTILE) among them."""
    sd.write(
        "dataset.jsonl",
        [
            {
                "id": i,
                "input": f"q{i}",
                "ground_truth": str(i),
                "tags": ["odd" if i % 2 else "even"],
            }
            for i in range(n)
        ],
    )
    sd.write(
        "outputs.jsonl",
        "".join(
            json.dumps({"id": i, "output": f"a {i if i % 3 else i + 1} {HOSTILE.get(i, '')}"})
            + "\n"
            for i in range(n)
            if i % 7
        ),
    )
    sd.suite(replay_suite(GRADERS, {"metric_key": "has", "op": "gte", "value": 0.5}, **extra))


def _cli(sd, *args: str, workers: int | None, out: str = "out", wait: bool = True):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("CI_EVALS_WORKERS", None)
    if workers is not None:
        env["CI_EVALS_WORKERS"] = str(workers)
    cmd = [sys.executable, "-m", "ci_evals", "run", str(sd.root / "suite.yaml"), "-q", *args]
    if "--resume" not in args:
        cmd += ["--output", str(sd.root / out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    stdout, stderr = proc.communicate(timeout=120)
    return proc.returncode, stdout, stderr


def _records(folder: Path) -> list[dict]:
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    for r in rows:
        r.pop("duration_s")
    return sorted(rows, key=lambda r: (r["sample_id"], r["run"]))


def _stable(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in VOLATILE}


@pytest.mark.parametrize("runs", [1, 3])
def test_a_split_run_writes_what_one_process_writes(sd, runs):
    _suite(sd, 300, num_runs=runs)
    assert _cli(sd, out="one", workers=1)[0] == 1  # 1 in 7 samples errored: over the error budget
    rc, stdout, stderr = _cli(sd, out="three", workers=3)
    assert rc == 1, stderr
    one, three = sd.summary("one"), sd.summary("three")
    assert three["workers"] == {"processes": 3} and "workers" not in one
    assert _stable(three) == _stable(one)
    assert one["records"] == 300 * runs and one["errors"]["samples"] == 43 * runs
    assert _records(sd.root / "three") == _records(sd.root / "one")
    text = (
        sd.root / "three" / "results.jsonl"
    ).read_text()  # each worker masks, cuts and replaces as one process does
    assert "Ab3xAb3x" not in text and "\\ud800" not in text and "[truncated by ci-evals: " in text
    assert sorted(p.name for p in (sd.root / "three").iterdir()) == sorted(
        p.name for p in (sd.root / "one").iterdir()
    )
    assert stdout.splitlines()[0].startswith("t: ERRORED")


def test_a_split_run_compares_with_its_baseline_as_one_process_does(sd):
    """The runner's aggregator keeps the outcomes a baseline compares with, in each worker too."""
    _suite(sd, 300)
    _cli(sd, out="base", workers=1)
    sd.write(  # now every 5th sample answers wrong as well: regressions against the baseline
        "outputs.jsonl",
        "".join(
            json.dumps({"id": i, "output": f"a {i if i % 3 and i % 5 else i + 1}"}) + "\n"
            for i in range(300)
            if i % 7
        ),
    )
    base = str(sd.root / "base")
    assert _cli(sd, "--baseline", base, out="one", workers=1)[0] == 1
    rc, _, stderr = _cli(sd, "--baseline", base, out="three", workers=3)
    assert rc == 1, stderr
    one, three = sd.summary("one"), sd.summary("three")
    assert three["workers"] == {"processes": 3}
    for summary in (one, three):  # listed in the order the outcomes were merged (worker by worker)
        for key in ("regressions", "improvements"):
            summary["baseline"][key].sort(key=lambda d: (int(d["sample_id"]), d["metric"]))
    assert _stable(three) == _stable(one)
    assert len(one["baseline"]["regressions"]) == 2 * 34  # 34 samples (5, 10, 20...), has and re


def test_a_selection_is_split_the_same_way(sd):
    _suite(sd, 200)
    args = ("--sample-tags", "odd", "--max-samples", "60")
    _cli(sd, *args, out="one", workers=1)
    _cli(sd, *args, out="two", workers=2)
    assert sd.summary("two")["workers"] == {"processes": 2}
    assert _records(sd.root / "two") == _records(sd.root / "one")
    assert {r["sample_id"] % 2 for r in _records(sd.root / "two")} == {1}
    assert len(_records(sd.root / "two")) == 60


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _big_passing_suite(sd, n: int) -> None:
    sd.write(
        "dataset.jsonl", [{"id": i, "input": f"q{i}", "ground_truth": str(i)} for i in range(n)]
    )
    sd.write("outputs.jsonl", [{"id": i, "output": f"a {i}"} for i in range(n)])
    sd.suite(replay_suite(GRADERS, {"metric_key": "has", "op": "gte", "value": 1.0}))


def _split_run_under_way(sd, n: int) -> tuple[subprocess.Popen, int]:
    """A run of ``n`` passing samples in two processes, once both have written records: (the
    command, its worker's pid)."""
    _big_passing_suite(sd, n)
    proc = _cli(sd, workers=2, wait=False)
    _when_writing(sd, proc)
    (run,) = _children(
        proc.pid
    )  # the supervised child doing the run (run/exits: a parent refuses a green exit without a verdict)
    (worker,) = _children(run)
    return proc, worker


def _when_writing(sd, proc) -> None:
    """Wait until both processes have written records, then return (the run is not over)."""
    part, results = sd.root / "out" / ".results.worker-1.jsonl", sd.root / "out" / "results.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if (
            part.exists()
            and part.stat().st_size > 100_000
            and results.exists()
            and results.stat().st_size > 100_000
        ):
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    raise AssertionError("the workers wrote nothing")


@pytest.mark.skipif(
    not Path("/proc/self/task").exists(), reason="finds the worker through /proc (Linux)"
)
def test_a_killed_worker_makes_the_run_partial_and_resume_finishes_it(sd):
    n = 24_000
    proc, worker = _split_run_under_way(sd, n)
    os.kill(worker, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    s = sd.summary()
    why = "worker process 1 of 2 was killed by SIGKILL"
    assert (s["verdict"], s["partial"], s["workers"]) == (
        "partial",
        True,
        {"processes": 2, "failed": [why]},
    )
    assert s["verdict_reason"] == f"{why}: its samples left were not run"
    assert (
        f"ci-evals: {why}: its samples left were not run (finish with --resume {sd.root / 'out'})"
        in stderr
    )
    rows = _records(
        sd.root / "out"
    )  # every line whole: a torn last line of the worker is not copied
    assert 0 < len(rows) < n and len({r["sample_id"] for r in rows}) == len(rows) == s["records"]
    assert [p.name for p in (sd.root / "out").iterdir() if p.name.startswith(".results")] == []
    rc, _, stderr = _cli(sd, "--resume", str(sd.root / "out"), workers=2)
    assert rc == 0, stderr
    rows = _records(sd.root / "out")
    assert sorted(r["sample_id"] for r in rows) == list(range(n))
    s = sd.summary()
    assert (s["verdict"], s["partial"], s["records"], s["workers"]) == (
        "passed",
        False,
        n,
        {"processes": 2},
    )


@pytest.mark.skipif(
    not Path("/proc/self/task").exists(), reason="finds the worker through /proc (Linux)"
)
def test_sigterm_to_the_first_process_stops_the_workers_and_keeps_their_lines(sd):
    n = 24_000
    proc, worker = _split_run_under_way(sd, n)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    with pytest.raises(ProcessLookupError):  # stopped and waited for
        os.kill(worker, 0)
    s = sd.summary()
    assert (s["verdict"], s["interrupted_by"], s["workers"]) == (
        "interrupted",
        "SIGTERM",
        {"processes": 2},
    )
    rows = _records(sd.root / "out")
    ids = [r["sample_id"] for r in rows]
    assert 0 < len(rows) < n and len(set(ids)) == len(rows) == s["records"]
    assert {i % 2 for i in ids} == {0, 1}  # both processes' lines
    assert _cli(sd, "--resume", str(sd.root / "out"), workers=2)[0] == 0
    assert sorted(r["sample_id"] for r in _records(sd.root / "out")) == list(range(n))


@pytest.mark.skipif(
    not Path("/proc/self/task").exists(), reason="finds the worker through /proc (Linux)"
)
def test_a_run_killed_outright_takes_its_workers_along_and_resume_counts_their_lines_once(sd):
    n = 24_000
    proc, worker = _split_run_under_way(sd, n)
    proc.kill()  # SIGKILL: nothing of the first process runs, it cannot stop the worker itself
    proc.communicate(timeout=60)
    deadline = time.time() + 10
    while not exited(worker) and time.time() < deadline:
        time.sleep(0.01)
    assert exited(worker)
    out = sd.root / "out"
    left = (out / ".results.worker-1.jsonl").read_bytes().splitlines(keepends=True)
    left = [line for line in left if line.endswith(b"\n")]
    assert len(left) > 100
    rc, _, stderr = _cli(sd, "--resume", str(out), workers=2)
    assert rc == 0, stderr
    assert sorted(r["sample_id"] for r in _records(out)) == list(range(n))  # each once
    s = sd.summary()
    assert (s["verdict"], s["partial"], s["records"]) == ("passed", False, n)
    text = (out / "results.jsonl").read_bytes()
    assert all(
        line in text for line in left[:: len(left) // 20]
    )  # taken as they were, not run again
    assert [p.name for p in out.iterdir() if p.name.startswith(".results")] == []


def test_a_new_run_removes_the_part_files_a_run_killed_outright_left(sd):
    _suite(sd, 120)
    out = sd.root / "out"
    out.mkdir()
    (out / ".results.worker-1.jsonl").write_text(json.dumps({"sample_id": 999, "run": 0}) + "\n")
    (out / ".results.worker-1.state.json").write_text("{}")
    (out / ".results.worker-2.jsonl").mkdir()  # not a part file: left alone
    (out / ".results.worker-3.jsonl").symlink_to(sd.root / "dataset.jsonl")  # removed, never read
    assert _cli(sd, workers=1)[0] == 1
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".results")) == [
        ".results.worker-2.jsonl"
    ]
    (out / ".results.worker-3.jsonl").symlink_to(sd.root / "dataset.jsonl")
    assert _cli(sd, "--resume", str(out), workers=1)[0] == 1
    assert (sd.root / "dataset.jsonl").exists()
    assert (
        sorted(r["sample_id"] for r in _records(out)) == list(range(120))
        and sd.summary()["records"] == 120
    )


def test_a_bad_worker_count_is_an_input_error(sd):
    _suite(sd, 5)
    env = {**os.environ, "CI_EVALS_WORKERS": "two"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci_evals",
            "run",
            str(sd.root / "suite.yaml"),
            "-q",
            "--output",
            str(sd.root / "out"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith("CI_EVALS_WORKERS must be a whole number of processes from 1 to 9999; got 'two'")
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("0", "'0'"),
        ("\u00b2", "'\u00b2'"),
        ("-3", "'-3'"),
        ("12345", "'12345'"),
        ("7" * 5000, repr("7" * 40)),
    ],
)
def test_every_bad_worker_count_is_the_same_one_line_error(monkeypatch, value, shown):
    from ci_evals._util import forks
    from ci_evals._util.errors import ConfigError

    monkeypatch.setenv("CI_EVALS_WORKERS", value)
    with pytest.raises(ConfigError) as err:
        forks.requested()
    assert (
        str(err.value)
        == f"CI_EVALS_WORKERS must be a whole number of processes from 1 to 9999; got {shown}"
    )
    monkeypatch.setenv("CI_EVALS_WORKERS", " \u0663 ")  # an Arabic-Indic three is a decimal digit
    assert forks.requested() == 3


# ---------------------------------------------------------------- what the split rests on


def _passes(ds: Dataset, passes: int):
    """(pass, sample id) of ``passes`` iterations, as Runner.jobs iterates once per model."""
    for n in range(passes):
        for sample in ds:
            yield n, sample.id


def test_dataset_shares_split_the_selection_in_blocks_taken_on_demand(tmp_path, monkeypatch):
    rows = [
        '{"input": "a"}',
        "",
        '   {"input": "b"}',
        "\u00a0",
        '{"input": "c", "tags": ["x"]}',
        "  ",
        '{"id": "k", "input": "d", "tags": ["x"]}',
        '{"input": "e"}',
        '{"input": "f", "tags": ["x"]}',
        '{"input": "g"}',
        '{"input": "h", "tags": ["x"]}',
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setattr(lanes, "BLOCKS", 4)

    def split(passes: int, order: list[int], **kw) -> tuple[list, list[list[int]]]:
        """(the selection, the positions in ``passes`` iterations of it that each of two processes
        ran), the next sample asked of process ``order[step % len(order)]``. Two Dataset copies
        share the Share's pipe as two forked processes do."""
        ds = Dataset(path, **kw)
        ds.scan()
        whole = [s.id for s in ds]
        share = lanes.Share(ds.count, passes)
        copies = [Dataset(path, **kw), Dataset(path, **kw)]
        got: list[list[int]] = [[], []]
        try:
            for c in copies:
                c.count, c.lane = ds.count, copy.copy(share)
            gens = [_passes(c, passes) for c in copies]
            done: set[int] = set()
            step = 0
            while len(done) < 2:
                p = order[step % len(order)]
                p = 1 - p if p in done else p
                step += 1
                try:
                    n, sid = next(gens[p])
                except StopIteration:
                    done.add(p)
                    continue
                got[p].append(n * len(whole) + whole.index(sid))
        finally:
            share.close()
        return whole, got

    for kw, expected in (
        ({}, [0, 1, 2, "k", 4, 5, 6, 7]),
        ({"sample_tags": ["x"]}, [2, "k", 5, 7]),
        ({"max_samples": 5}, [0, 1, 2, "k", 4]),
    ):
        for passes in (1, 2, 3):
            size = -(-len(expected) * passes // 4)  # the passes laid end to end, in 4 blocks
            for order in ([0], [1], [0, 1], [0, 0, 1], [1, 1, 1, 0]):
                whole, got = split(passes, order, **kw)
                assert whole == expected  # the unnamed rows keep their ids in every share
                assert sorted(got[0] + got[1]) == list(range(len(whole) * passes)), (
                    kw,
                    passes,
                    order,
                )
                assert got[0] == sorted(got[0]) and got[1] == sorted(got[1])  # in the file's order
                blocks = [{p // size for p in mine} for mine in got]
                assert not blocks[0] & blocks[1]  # each block run whole by one process
                if len(order) == 1:  # a process that asks alone takes everything
                    assert (
                        got[order[0]] == list(range(len(whole) * passes))
                        and got[1 - order[0]] == []
                    )
                else:  # both took blocks
                    assert got[0] and got[1]


def _rec(i: int, model=None, run=0) -> dict:
    grades = {
        "a": {
            "score": (i % 5) / 4,
            "passed": i % 5 >= 2,
            "error": None,
            "metadata": {"usage": {"prompt_tokens": i, "completion_tokens": 1}, "cost_usd": 0.25},
        },
        "b": {"score": 1.0 if (i + run) % 3 else 0.0, "passed": bool((i + run) % 3), "error": None},
    }
    rec = {
        "sample_id": i,
        "run": run,
        "model": model,
        "grades": grades,
        "error": None,
        "usage": {"prompt_tokens": 2, "completion_tokens": 3},
        "retries": i % 2,
    }
    if i % 11 == 0:
        rec["error"] = {"category": "target", "message": f"boom {i % 4}"}
        rec["grades"] = {
            n: {"score": 0.0, "passed": False, "error": "target error"} for n in ("a", "b")
        }
    elif i % 13 == 0:
        rec["grades"]["b"] = {
            "score": 0.0,
            "passed": False,
            "error": f"judge failed {i}",
            "error_category": "grading",
        }
    return rec


def _merged(recs: list[dict], config: dict, parts: int) -> tuple[Aggregator, Aggregator]:
    """(one aggregator fed every record, one merged from the states of ``parts`` fed a share each)."""
    whole = Aggregator(config, keep_outcomes=True)
    for r in recs:
        whole.add(r)
    merged = Aggregator(config, keep_outcomes=True)
    for k in range(parts):
        part = Aggregator(config, keep_outcomes=True)
        for r in recs:
            if r["sample_id"] % parts == k:
                part.add(r)
        merged.merge(json.loads(json.dumps(part.state())))
    return whole, merged


@pytest.mark.parametrize("runs", [1, 2])
def test_an_aggregator_merged_from_states_equals_one_fed_everything(runs):
    config = {
        "graders": {"a": {"rule": ["gte", 0.5]}, "b": {"rule": ["gte", 1.0]}},
        "gates": [],
        "num_runs": runs,
        "reducer": "mean",
        "max_errors": 0,
        "max_error_rate": None,
    }
    recs = [
        _rec(i, model, run) for model in ("m1", "m2") for i in range(120) for run in range(runs)
    ]
    whole, merged = _merged(recs, config, 3)
    a, b = whole.finish(), merged.finish()
    key = lambda f: (f["model"], f["sample_id"], f["metric"])  # noqa: E731
    a["flaky"], b["flaky"] = sorted(a["flaky"], key=key), sorted(b["flaky"], key=key)
    assert len(a["errors"]["groups"]) == 13 and (
        a["metrics"]["a"]["n"],
        a["metrics"]["a"]["errors"],
    ) == (240, 22)
    assert b == a
    assert merged.outcomes == whole.outcomes and merged.usage == whole.usage
    assert merged.cost_usd == pytest.approx(whole.cost_usd) and merged.retries == whole.retries
    if runs == 2:
        assert a["flaky"]


def test_a_workers_state_file_is_read_whatever_its_numbers_look_like(tmp_path):
    state = {
        "records": 2,
        "sample": "0" * 40,
        "big": 12345678901234567890123,
    }  # orjson's reader refuses both
    path = tmp_path / ".results.worker-1.state.json"
    path.write_text(json.dumps(state))
    assert parts.read_state(path) == state
    assert parts.read_state(tmp_path / "absent.json") is None


def test_the_cap_on_distinct_error_messages_holds_across_a_merge(monkeypatch):
    monkeypatch.setattr("ci_evals.gating.error_tally.MAX_ERROR_GROUPS", 6)
    config = {
        "graders": {"a": {"rule": ["gte", 0.5]}, "b": {"rule": ["gte", 1.0]}},
        "gates": [],
        "num_runs": 1,
    }
    whole, merged = _merged([_rec(i) for i in range(300)], config, 3)
    groups = merged.finish()["errors"]["groups"]
    named = [g for g in groups if g["message"] != "(other distinct messages)"]
    assert (
        len(named) == 6 and len(groups) == 8
    )  # the rest counted under one line per category and grader
    assert sum(g["count"] for g in groups) == sum(
        g["count"] for g in whole.finish()["errors"]["groups"]
    )


def test_an_interrupted_workers_unfinished_runs_are_reduced_after_the_merge():
    config = {
        "graders": {"a": {"rule": ["gte", 0.5]}, "b": {"rule": ["gte", 1.0]}},
        "gates": [],
        "num_runs": 2,
        "reducer": "mean",
    }
    part, first = Aggregator(config), Aggregator(config)
    part.add(_rec(1, run=0))  # its second run never came
    first.merge(json.loads(json.dumps(part.state())))
    assert list(first.pending) == [(None, "1")]
    assert first.finish()["n_samples"] == 1


def test_reports_written_by_two_processes_equal_those_written_by_one(sd, tmp_path):
    _suite(sd, 150)
    _cli(sd, workers=1)
    folder = sd.root / "out"
    before = {n: (folder / n).read_bytes() for n in ("summary.md", "junit.xml", "report.html")}
    for n in before:
        (folder / n).unlink()
    forked = in_fresh_process(
        f"""
        import json
        from pathlib import Path
        from ci_evals._util import forks
        import ci_evals.reports.write as w
        w.BESIDE_BYTES = 0
        seen = []
        real = forks.Beside.__init__
        def spy(self, work):
            real(self, work)
            seen.append(self.pid is not None)
        forks.Beside.__init__ = spy
        from ci_evals.reports import console
        out = Path({str(folder)!r})
        summary = json.loads((out / "summary.json").read_text())
        tally = w.write_outputs(out, summary, console.FailingPass(1))  # gathered by the forked process
        same = console.render(summary, color=False, failing=tally) == console.render(summary, w.own_results(
            out / "results.jsonl"), color=False)
        print(seen, same, tally.failures)
    """,
        {"CI_EVALS_WORKERS": ""},
    )
    forked_too = sys.platform.startswith("linux") and os.cpu_count() >= 2
    assert forked == f"[{forked_too}] True 234"  # the console's failing samples came back whole
    assert {n: (folder / n).read_bytes() for n in before} == before


def test_when_no_worker_process_can_be_started_the_run_is_done_in_one(sd):
    _suite(sd, 120)
    code = f"""
        import errno, os, sys
        real, calls = os.fork, []
        def fork():
            calls.append(1)
            if len(calls) == 2:
                raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
            return real()
        os.fork = fork
        from ci_evals.cli.app import main
        rc = main(["run", {str(sd.root / "suite.yaml")!r}, "-q", "--output", {str(sd.root / "out")!r}])
        print(rc, len(calls))
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CI_EVALS_WORKERS": "3"},
    )
    assert proc.stdout.strip().splitlines()[-1] == "1 2", proc.stderr
    assert (
        "warning: could not start worker processes (Resource temporarily unavailable): the run uses one"
        in proc.stderr
    )
    s = sd.summary()
    assert "workers" not in s and s["records"] == 120 and s["errors"]["samples"] == 18
    assert sorted(r["sample_id"] for r in _records(sd.root / "out")) == list(range(120))
    assert sorted(p.name for p in (sd.root / "out").iterdir()) == RUN_FILES


def test_the_progress_line_counts_the_workers_samples_and_ends_once(capsys):
    from ci_evals.run.progress import Progress

    peers = [0, 0]
    progress = Progress(4, enabled=True, peers=lambda: tuple(peers))
    progress.advance({"grades": {"a": {"error": None}}, "error": None})
    progress.advance({"grades": {"a": {"error": "judge failed"}}, "error": None})
    assert capsys.readouterr().err == ""
    peers[:] = [2, 1]  # the workers' counts, read from their shared page
    progress.refresh()
    progress.refresh()
    assert capsys.readouterr().err == "progress: 4/4 samples (2 with errors)\n"


def test_the_progress_line_shown_while_waiting_for_the_workers_is_not_an_internal_error(sd, capsys):
    import asyncio

    from ci_evals.run.progress import Progress
    from ci_evals.run.runner import Runner, RunOptions
    from ci_evals.suite.loader import load_suite

    _suite(sd, 4)  # sample 0 has no recorded output: an error
    runner = Runner(load_suite(sd.root / "suite.yaml"), RunOptions(output=sd.root / "o"))
    peers = [0, 0]
    progress = Progress(6, enabled=True, peers=lambda: tuple(peers))
    asyncio.run(
        runner.run_records(progress)
    )  # this process's share, whose event loop names the line's note
    capsys.readouterr()
    peers[:] = [2, 1]  # then, the loop closed, the workers' counts (lanes._wait)
    progress.refresh()
    progress.refresh()
    assert capsys.readouterr().err == "progress: 6/6 samples (2 with errors)\n"


def _runner(sd, graders=GRADERS, **spec_extra):
    from ci_evals.run.runner import Runner, RunOptions
    from ci_evals.suite.loader import load_suite

    return Runner(
        load_suite(sd.suite(replay_suite(graders, **spec_extra))), RunOptions(output=sd.root / "o")
    )


def test_only_a_run_that_computes_alone_may_be_split(sd):
    from ci_evals.run.runner import Runner, RunOptions
    from ci_evals.suite.loader import load_suite

    _suite(sd, 3)
    assert _runner(sd).cpu_only() is True
    sd.write("g.py", "def g(sample, submission):\n    return 1.0\n")
    sd.write("setup.py", "def prepare(suite):\n    pass\n")
    assert _runner(sd, graders={"py": {"kind": "tool", "function": "g.py:g"}}).cpu_only() is False
    assert _runner(sd, setup_script="setup.py:prepare").cpu_only() is False
    command = {
        "name": "c",
        "dataset": "dataset.jsonl",
        "graders": GRADERS,
        "target": {"kind": "command", "command": [sys.executable, "-c", "print(1)"]},
    }
    assert (
        Runner(load_suite(sd.suite(command)), RunOptions(output=sd.root / "o")).cpu_only() is False
    )


class _Jobs:
    def __init__(self, jobs: int, cpu_only: bool = True) -> None:
        self.jobs, self.cpu = jobs, cpu_only

    def total_jobs(self) -> int:
        return self.jobs

    def cpu_only(self) -> bool:
        return self.cpu


@pytest.mark.parametrize(
    ("env", "jobs", "cpu_only", "cores", "expected"),
    [
        ("", 20_000, True, 2, 2),  # large enough, two cores: one worker per core
        ("", 19_999, True, 2, 1),  # too small to pay for the fork and the merge
        ("", 100_000, True, 1, 1),  # one usable core
        ("", 100_000, True, 64, 8),  # at most MAX_WORKERS
        ("", 100_000, False, 4, 1),  # calls a model, an agent or a program: one process
        ("1", 100_000, True, 4, 1),  # asked for one process
        ("3", 10, True, 2, 3),  # asked for three, however small
        ("3", 2, True, 2, 2),  # never more workers than jobs
        ("3", 100, False, 2, 1),  # asking does not split a run that is not CPU-bound
    ],
)
def test_how_many_worker_processes_a_run_gets(monkeypatch, env, jobs, cpu_only, cores, expected):
    from ci_evals._util import forks
    from ci_evals.run import lanes

    monkeypatch.setenv("CI_EVALS_WORKERS", env)
    monkeypatch.setattr(forks, "can_fork", lambda: True)
    monkeypatch.setattr(forks, "usable_cores", lambda: cores)
    assert lanes.worker_count(_Jobs(jobs, cpu_only)) == expected
    monkeypatch.setattr(forks, "can_fork", lambda: False)  # not Linux, or another thread is running
    assert lanes.worker_count(_Jobs(jobs, cpu_only)) == 1


def test_the_options_stay_inputs_and_the_run_returns_what_it_learned(sd, monkeypatch):
    import asyncio
    import dataclasses

    from ci_evals.run.runner import Runner, RunOptions, RunOutcome
    from ci_evals.suite.loader import load_suite

    monkeypatch.setenv("CI_EVALS_WORKERS", "1")
    _suite(sd, 4)
    opts = RunOptions(
        output=sd.root / "o",
        progress=False,
        shard={"index": 1, "count": 1, "selected": 4},
        selection={"by": ["--sample-pattern"], "selected": 4, "total": 4},
    )
    before = copy.deepcopy(opts)
    runner = Runner(load_suite(sd.root / "suite.yaml"), opts)
    summary = lanes.execute(runner)
    assert dataclasses.asdict(opts) == dataclasses.asdict(before)  # nothing written back
    assert list(summary)[-2:] == ["shard", "selection"]  # given, in this order, after the rest
    assert summary["shard"] == before.shard and summary["selection"] == before.selection
    assert "workers" not in summary and "endpoints" not in summary  # one process, no LLM call
    outcome = asyncio.run(Runner(load_suite(sd.root / "suite.yaml"), opts).run_records())
    assert isinstance(outcome, RunOutcome) and outcome.interrupted is None
    assert (outcome.learned.letta, outcome.learned.endpoints) == (None, None)
