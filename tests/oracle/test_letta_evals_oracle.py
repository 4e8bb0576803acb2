"""letta-evals itself as the oracle: the same suites, on the same real Letta server, through
letta-evals (released versions, each in its own venv) and through ci-evals (opt-in:
``pytest -m letta_oracle``; ``.ci/run`` installs the venvs and runs it, docs/letta-evals-oracle.md).

Every per-sample score must be equal (to 1e-9) and the verdicts equal (letta-evals' exit code 0/1
against ci-evals'), except where a case names a documented deviation: then that deviation, and
only it, is asserted (so a new difference fails). The cases run once per session, one after the
other; the tests below read their outcomes.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.oracle import harness

pytestmark = pytest.mark.letta_oracle

MODEL = os.environ.get("LETTA_TEST_MODEL", "openai-proxy/gpt-4o-mini")
# The documented deviations (README, "Coming from letta-evals"): the only differences allowed.
ACCURACY_SCALE = "accuracy <= 1 is a fraction in ci-evals, a percentage in letta-evals 0.4-0.20"
ERRORS_FAIL = "an errored sample fails ci-evals' gate; letta-evals leaves it out"
# ci-evals' gate on a reward, checked against the mean reward letta-evals computed (summary.json)
REWARD_GATE = "reward avg_score gte 0.45"


@dataclass(frozen=True)
class Case:
    version: str  # letta-evals version
    folder: (
        str  # under letta_evals_examples/v<version>/ (letta-evals' own) or suites/ (hand-written)
    )
    suite: str
    deviation: str | None = None  # the one documented verdict deviation this case shows
    samples: int = 0  # how many samples both must grade
    own: bool = field(default=False)  # letta-evals' own example
    gate: str | None = None  # 0.21+ (no gate of their own): ci-evals' --gate on the reward

    @property
    def id(self) -> str:
        return f"{self.version}-{self.folder}-{Path(self.suite).stem}"

    def source(self) -> Path:
        return (
            harness.EXAMPLES / f"v{self.version}" / self.folder
            if self.own
            else harness.SUITES / self.folder
        )


CASES = [
    # letta-evals' own examples, adapted only in server URL and model handle
    Case("0.5.0", "simple-tool-grader", "last_assistant_suite.yaml", samples=5, own=True),
    Case("0.18.0", "multiturn-per-turn-grading", "suite.yaml", samples=5, own=True),
    Case("0.18.0", "per-sample-rubric", "suite.yaml", samples=3, own=True),
    # hand-written: every grader kind and extractor, agent-as-judge, each gate kind, deviations
    Case("0.5.0", "capital-0.5", "suite.yaml", samples=5),
    Case("0.5.0", "accuracy-0.5", "suite.yaml", deviation=ACCURACY_SCALE, samples=2),
    Case("0.18.0", "capital-0.18", "suite.yaml", samples=5),
    Case("0.18.0", "errors-0.18", "suite.yaml", deviation=ERRORS_FAIL, samples=1),
    # letta-evals 0.21+: the letta_code target (Letta Code on the same server), reward blocks, no gate
    Case("0.26.0", "reward-composition", "suite.logical-and.yaml", samples=5, own=True),
    Case(
        "0.26.0", "letta-code-simple-edit", "suite.yaml", deviation=ERRORS_FAIL, samples=0, own=True
    ),
    Case("0.26.0", "code-reward-0.26", "suite.yaml", samples=3, gate=REWARD_GATE),
    Case("0.26.0", "code-reward-0.26", "suite-custom.yaml", samples=3, gate=REWARD_GATE),
]


def run_case(
    case: Case, env: dict[str, str], work: Path
) -> tuple[harness.Outcome, harness.Outcome, Path]:
    """One case: letta-evals and ci-evals at once, each on its own adapted copy of the suite folder
    (a suite's setup script rewrites its folder)."""
    base = os.environ["LETTA_BASE_URL"]
    le_dir, ci_dir = work / f"{case.id}-le", work / f"{case.id}-ci"
    for folder in (le_dir, ci_dir):
        if not folder.exists():
            harness.adapt(case.source(), folder, base, MODEL)
    ci_args = ("--gate", case.gate) if case.gate else ()
    with ThreadPoolExecutor(2) as pool:
        le = pool.submit(
            harness.run_letta_evals, case.version, le_dir / case.suite, le_dir / "le", env
        )
        ci = pool.submit(harness.run_ci_evals, ci_dir / case.suite, ci_dir / "ci", env, *ci_args)
        return le.result(), ci.result(), ci_dir


def selected(session: pytest.Session) -> list[Case]:
    """The cases the collected tests need (``-k 0.26.0`` runs only those), in CASES' order."""
    wanted = {
        item.callspec.params["case"].id
        for item in session.items
        if hasattr(item, "callspec") and isinstance(item.callspec.params.get("case"), Case)
    }
    if any(
        item.name == "test_accuracy_scale_percent_reproduces_letta_evals_verdict"
        for item in session.items
    ):
        wanted |= {c.id for c in CASES if c.deviation == ACCURACY_SCALE}
    return [c for c in CASES if c.id in wanted]


@pytest.fixture(scope="session")
def outcomes(request, letta, judge_url, work):
    """The selected cases through letta-evals and ci-evals: {case id: (letta-evals, ci-evals, ci's
    folder)}; harness.CASE_WORKERS cases at a time."""
    cache = work / "letta-evals-cache"
    harness.pricing_file(cache)
    env = harness.env_for(judge_url, cache)
    with ThreadPoolExecutor(harness.CASE_WORKERS) as pool:
        futures = {
            case.id: pool.submit(run_case, case, env, work) for case in selected(request.session)
        }
        return {cid: f.result() for cid, f in futures.items()}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_same_scores_and_verdict(outcomes, case):
    le, ci, folder = outcomes[case.id]
    assert le.rc in (0, 1), le.output[-4000:]
    assert ci.rc in (0, 1), ci.output[-4000:]
    # A grader that raises: letta-evals 0.21+ errors the whole sample (category "grading", no grades
    # kept), ci-evals errors that grade and the reward (the sample then counts as errored).
    assert ci.sample_errors.keys() == le.sample_errors.keys() - le.grading_errors, (
        le.sample_errors,
        ci.sample_errors,
    )
    for sid in le.grading_errors:
        assert any(
            le.sample_errors[sid] in why for (s, _), why in ci.graded_errors.items() if s == sid
        )
        assert ci.graded_errors.get((sid, "reward"), "").startswith("reward not computed: grader ")
    errored = set(le.sample_errors)  # graded by neither (letta-evals grades nothing of them)
    le_scores = {k: v for k, v in le.scores.items() if k[0] not in errored}
    ci_scores = {k: v for k, v in ci.scores.items() if k[0] not in errored}
    assert len({sid for sid, _ in le_scores}) == case.samples, le.output[-4000:]
    assert set(ci_scores) == set(le_scores)
    differ = {
        k: (le_scores[k], ci_scores[k])
        for k in le_scores
        if abs(le_scores[k] - ci_scores[k]) > 1e-9
    }
    assert differ == {}
    assert {k for k in ci.graded_errors if k[0] not in errored} == {
        k for k in le.graded_errors if k[0] not in errored
    }
    summary = json.loads((folder / "ci" / "summary.json").read_text())
    if case.deviation is None:
        assert errored == set()
        if (
            case.gate
        ):  # letta-evals 0.21+ has no gate (exit 0): ci-evals' gate against its mean reward
            assert le.rc == 0, le.output[-4000:]
            [model] = json.loads(
                (folder.with_name(f"{case.id}-le") / "le" / "summary.json").read_text()
            )["models"]
            [gate] = summary["gates"]
            assert gate["metric_key"] == "reward" and abs(gate["actual"] - model["reward"]) <= 1e-9
            passed = model["reward"] >= float(case.gate.split()[-1])
            assert (gate["status"], ci.rc) == (("passed", 0) if passed else ("failed", 1)), (
                ci.output
            )
        else:
            assert ci.rc == le.rc, ci.output
    elif case.deviation == ACCURACY_SCALE:
        assert (le.rc, ci.rc) == (0, 1)
        [gate] = summary["gates"]
        assert (
            gate["metric"] == "accuracy" and 0 < gate["value"] <= 1 and gate["status"] == "failed"
        )
        assert "letta-evals 0.4-0.20 reads it as" in ci.output
    elif case.deviation == ERRORS_FAIL:
        assert errored != set()
        assert (le.rc, ci.rc) == (0, 1)
        assert summary["verdict"] == "errored"
        if summary["gates"]:
            assert {g["status"] for g in summary["gates"]} == {"errored"}
        else:  # no gate (letta-evals 0.21+): the run's error budget, 0 unless set
            assert summary["verdict_reason"].endswith("; no gate configured"), summary[
                "verdict_reason"
            ]


def test_accuracy_scale_percent_reproduces_letta_evals_verdict(outcomes, judge_url, work):
    """The opt-in: the deviating suite with ``accuracy_scale: percent`` gets letta-evals' verdict."""
    [case] = [c for c in CASES if c.deviation == ACCURACY_SCALE]
    le, _, folder = outcomes[case.id]
    suite = folder / "suite-percent.yaml"
    doc = yaml.safe_load((folder / case.suite).read_text())
    suite.write_text(yaml.safe_dump({"accuracy_scale": "percent", **doc}, sort_keys=False))
    ci = harness.run_ci_evals(
        suite, folder / "ci-percent", harness.env_for(judge_url, work / "letta-evals-cache")
    )
    assert (ci.rc, le.rc) == (0, 0), ci.output
    assert ci.scores == le.scores
    assert "warning" not in ci.output
