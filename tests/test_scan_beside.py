"""A large dataset scanned by a forked process while the suite's target and graders load
(ci_evals.suite.loader._scan_beside), and the value-returning :class:`ci_evals._util.forks.Beside`.

Each case loads in a fresh process: fork is only taken with one thread, which a pytest process
that ran other tests may not have. ``SCAN_BESIDE_BYTES`` is lowered so that small files fork."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import exited, in_fresh_process, replay_suite

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
    reason="forks on Linux with 2 cores",
)

LOAD = """
    import json, os, sys
    from ci_evals._util import forks
    from ci_evals._util.errors import ConfigError
    import ci_evals.suite.loader as loader
    loader.SCAN_BESIDE_BYTES = int(os.environ["LIMIT"])
    forked, warmed = [], []
    real = forks.Beside.__init__
    def spy(self, work):
        real(self, work)
        forked.append(self.pid is not None)
    forks.Beside.__init__ = spy
    events = []
    real_cancel, real_scan = forks.Beside.cancel, loader.Dataset.scan
    def cancel(self):
        events.append("cancel")
        real_cancel(self)
    def scan(self, *a):
        if os.getpid() == parent:
            events.append("scan")
        return real_scan(self, *a)
    parent = os.getpid()
    forks.Beside.cancel, loader.Dataset.scan = cancel, scan
    kw = json.loads(os.environ["KW"])
    if kw.get("shard"):
        kw["shard"] = tuple(kw["shard"])
    try:
        s = loader.load_suite(os.environ["SUITE"], meanwhile=lambda: warmed.append(1), **kw)
        out = {"counts": [s.dataset.total, s.dataset.count, s.dataset.unsharded],
               "ids": [str(x.id) for x in s.dataset]}
    except ConfigError as exc:
        out = {"error": str(exc)}
    try:
        os.waitpid(-1, os.WNOHANG)
        out["children"] = "left"
    except ChildProcessError:
        out["children"] = "none"
    out.update(forked=forked, warmed=len(warmed), events=events)
    print(json.dumps(out))
"""


def _load(sd, limit: int, **kw) -> dict:
    return json.loads(
        in_fresh_process(
            LOAD,
            {
                "LIMIT": str(limit),
                "KW": json.dumps(kw),
                "CI_EVALS_WORKERS": "",
                "SUITE": str(sd.root / "suite.yaml"),
            },
        )
    )


def _suite(sd, rows: list, graders: dict | None = None) -> None:
    sd.write(
        "dataset.jsonl", "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    )
    sd.write("outputs.jsonl", [{"id": i, "output": "a"} for i in range(len(rows))])
    sd.suite(replay_suite(graders or {"has": {"kind": "tool", "function": "contains"}}))


ROWS = [
    {"id": i, "input": f"q{i}", "ground_truth": "a", "tags": ["odd" if i % 2 else "even"]}
    for i in range(400)
]


@pytest.mark.parametrize(
    "kw, selected",
    [
        ({}, 400),
        ({"sample_tags": ["odd"]}, 200),
        ({"max_samples": 50}, 50),
        ({"shard": [2, 3]}, 400),
        ({"sample_tags": ["even"], "max_samples": 120, "shard": [1, 2]}, 120),
    ],
)
def test_a_dataset_scanned_beside_gives_the_counts_and_samples_of_one_scanned_in_order(
    sd, kw, selected
):
    _suite(sd, ROWS)
    beside, inline = _load(sd, 0, **kw), _load(sd, 1 << 40, **kw)
    assert beside["forked"] == [True] and beside["warmed"] == 1
    assert inline["forked"] == [] and inline["warmed"] == 0
    total, count, unsharded = beside["counts"]
    assert (total, unsharded) == (400, selected) and count == len(beside["ids"])
    assert 0 < count < selected if "shard" in kw else count == selected
    assert beside["counts"] == inline["counts"] and beside["ids"] == inline["ids"]
    assert beside["children"] == "none"


@pytest.mark.parametrize(
    "bad, error",
    [
        (
            '{"id": 3, "input": "again"}',
            "dataset.jsonl:301: duplicate sample id 3 (first on line 4)",
        ),
        (
            "{not json",
            "dataset.jsonl:301: invalid JSON at column 2: Expecting property name enclosed in double quotes",
        ),
        (
            '{"id": 900, "input": 5}',
            "dataset.jsonl:301: 'input' must be a string or a list of strings, got int",
        ),
    ],
)
def test_a_bad_row_found_by_the_process_beside_is_reported_as_the_scan_in_order_reports_it(
    sd, bad, error
):
    _suite(sd, ROWS[:300] + [bad] + ROWS[300:])
    beside, inline = _load(sd, 0), _load(sd, 1 << 40)
    assert beside["forked"] == [True] and beside["error"].endswith(error)
    assert beside["error"] == inline["error"] and beside["children"] == "none"


def test_an_error_before_the_dataset_is_reported_first_and_the_process_beside_is_stopped(sd):
    _suite(sd, ROWS[:300] + ["{not json"])
    (sd.root / "outputs.jsonl").write_text(
        '{"id": 1}\n'
    )  # the target's error comes first, as in order
    beside = _load(sd, 0)
    assert beside["forked"] == [True] and beside["children"] == "none"
    assert beside["error"].endswith(
        "outputs.jsonl:1: target: a record needs 'output' or 'messages'"
    )
    assert beside["error"] == _load(sd, 1 << 40)["error"]


def test_graders_that_check_every_sample_are_given_them_by_a_scan_here(sd):
    _suite(
        sd,
        [{**r, "rubric_vars": {"x": "1"}} for r in ROWS[:50]],
        {
            "j": {
                "kind": "rubric",
                "prompt": "Is {submission} right for {x}?",
                "model": "gpt-4o-mini",
                "rubric_vars": ["x"],
            }
        },
    )
    beside = _load(sd, 0)
    assert beside["forked"] == [True] and beside["warmed"] == 0 and beside["children"] == "none"
    assert beside["counts"] == [50, 50, 50]
    assert beside["events"] == [
        "cancel",
        "scan",
        "cancel",
    ]  # the process beside is stopped before the scan here
    _suite(
        sd,
        [{**r, "rubric_vars": {"x": "1"}} for r in ROWS[:50]] + [{"id": 99, "input": "q"}],
        {
            "j": {
                "kind": "rubric",
                "prompt": "Is {submission} right for {x}?",
                "model": "gpt-4o-mini",
                "rubric_vars": ["x"],
            }
        },
    )
    assert "rubric_vars" in _load(sd, 0)["error"]


BESIDE = """
    import os
    from ci_evals._util import forks
    me = os.getpid()
    def work():
        if os.environ.get("FAIL") and os.getpid() != me:
            raise RuntimeError("only in the child")
        return {"by": "parent" if os.getpid() == me else "child", "data": list(range(50_000))}
    side = forks.Beside(work)
    got = side.join()
    print(side.pid, got["by"], sum(got["data"]))
    real_fork, os.fork = os.fork, lambda: (_ for _ in ()).throw(OSError(11, "Resource temporarily unavailable"))
    refused = forks.Beside(work)
    print(refused.pid, refused.join()["by"])
    os.fork = real_fork
    slow = forks.Beside(lambda: __import__("time").sleep(60))
    child = slow.pid
    slow.cancel()
    if child is None:
        print("unforked")
    else:
        try:
            os.kill(child, 0)
            print("alive")
        except ProcessLookupError:
            print("gone")
"""


def test_beside_returns_the_childs_value_or_computes_it_here_and_cancel_stops_the_child():
    def run(**env):
        return in_fresh_process(BESIDE, {"CI_EVALS_WORKERS": "", **env}).split()

    total = str(sum(range(50_000)))
    # 50,000 numbers: more than a pipe holds unread; a fork refused (EAGAIN): the work done here
    assert run() == ["None", "child", total, "None", "parent", "gone"]
    assert run(FAIL="1") == ["None", "parent", total, "None", "parent", "gone"]
    # one process asked for: nothing forked, the work done here when joined
    assert run(CI_EVALS_WORKERS="1") == ["None", "parent", total, "None", "parent", "unforked"]


def test_a_process_beside_dies_with_the_process_that_forked_it():
    code = (
        "import time\nfrom ci_evals._util import forks\nside = forks.Beside(lambda: time.sleep(60))\n"
        "print(side.pid, flush=True)\ntime.sleep(60)\n"
    )
    first = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "CI_EVALS_WORKERS": ""},
    )
    child = None
    try:
        child = int(first.stdout.readline())
        assert not exited(child)
        first.kill()  # outright: nothing of the first process runs, its cleanup neither
        first.wait(10)
        deadline = time.monotonic() + 10
        while not exited(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert exited(child)
    finally:
        first.kill()
        first.stdout.close()
        if child is not None and not exited(child):
            os.kill(child, signal.SIGKILL)
