"""Regression gates on a noisy judge: A/A false alarms, A/B power, stability (issue 38).

Offline and seeded, on examples/noisy-judge/ (200 recorded answers; a stand-in judge passes each
with a per-sample probability, easy 0.95 / borderline 0.6 / hard 0.15, asked 3 times per sample;
the gates as users write them: ``max_drop: 0.05`` and ``max_regressions: 3``). One baseline, then
``--reruns`` reruns against it, each its own ``python -m ci_evals run`` process with its own
``NOISY_JUDGE_SEED``:

* ``aa``: the same answers again (nothing changed): a failing gate is a false alarm;
* ``ab``: suite-regressed.yaml, the borderline answers worse (the judge's pass probability halves
  on them, 0.6 -> 0.3: about 12 points off the mean): a failing gate is a caught regression;
* ``edge``: half of those answers worse (about 6 points off the mean, just past ``max_drop``):
  reruns disagree, which is where ``gates[].stability`` can be checked against them.

Per gate it prints the reruns that failed the gate, the statuses seen, the mean of
``gates[].stability`` beside how often two reruns actually gave the same status, and the wall
time of a rerun (the whole process: interpreter start, imports, run, reports).

    python bench/noise.py                           # this tree, 40 reruns of each (~4 min)
    python bench/noise.py --src /tmp/old/src        # another tree (the "before" figures)
    python bench/noise.py --scenarios aa ab         # not the edge case
    python bench/noise.py --smoke                   # 2 reruns of aa and ab, seconds

``--src`` puts that tree's ``src`` first on PYTHONPATH; the same seeds give both trees the same
judge answers, so only the gates' decisions differ. One JSON object per (scenario, gate) on stdout,
as bench/run.py prints them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "examples" / "noisy-judge"
SCENARIOS = {"aa": "suite.yaml", "ab": "suite-regressed.yaml", "edge": "suite-edge.yaml"}


def _edge(example: Path) -> None:
    """``edge``: half the borderline answers worse (40 of 200 samples, 0.6 -> 0.3): a drop of about
    6 points, just past ``max_drop: 0.05``, where reruns do not all agree (the stability check)."""
    lines = (example / "outputs.jsonl").read_text().splitlines()
    worse = (example / "outputs-regressed.jsonl").read_text().splitlines()
    changed = [i for i, (a, b) in enumerate(zip(lines, worse, strict=True)) if a != b]
    for i in changed[::2]:
        lines[i] = worse[i]
    (example / "outputs-edge.jsonl").write_text("\n".join(lines) + "\n")
    suite = (
        (example / "suite.yaml")
        .read_text()
        .replace("outputs: outputs.jsonl", "outputs: outputs-edge.jsonl")
    )
    (example / "suite-edge.yaml").write_text(suite)


def _run(
    suite: Path, out: Path, seed: str, src: str | None, baseline: Path | None
) -> tuple[int, float]:
    env = {**os.environ, "NOISY_JUDGE_SEED": seed}
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    cmd = [sys.executable, "-m", "ci_evals", "run", str(suite), "--output", str(out), "-q"]
    if baseline is not None:
        cmd += ["--baseline", str(baseline)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"ci-evals exited {proc.returncode}: {cmd}\n{proc.stderr[-2000:]}")
    return proc.returncode, wall


def _gate_name(gate: dict) -> str:
    return "max_regressions 3" if "max_regressions" in gate else "max_drop 0.05"


def agreement(statuses: list[str]) -> float:
    """How often two different reruns gave the same status (over all pairs)."""
    r = len(statuses)
    if r < 2:
        return 1.0
    return sum(c * (c - 1) for c in Counter(statuses).values()) / (r * (r - 1))


def measure(
    tmp: Path, reruns: int, src: str | None = None, scenarios=tuple(SCENARIOS), emit=None
) -> list[dict]:
    """Baseline once, then ``reruns`` reruns of each scenario against it; one record per (scenario, gate)."""
    tree = src or "this tree"
    example = tmp / "example"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("__pycache__", "*.md"))
    _edge(example)
    base = tmp / "baseline"
    _run(example / "suite.yaml", base, "baseline", src, None)
    records = []
    for scenario in scenarios:
        suite_file = SCENARIOS[scenario]
        per_gate: dict[int, dict] = {}
        walls, exits = [], []
        for i in range(1, reruns + 1):
            out = tmp / f"{scenario}-{i}"
            code, wall = _run(example / suite_file, out, f"{scenario}-{i}", src, base)
            walls.append(wall)
            exits.append(code)
            summary = json.loads((out / "summary.json").read_text())
            for k, gate in enumerate(summary["gates"]):
                g = per_gate.setdefault(
                    k, {"name": _gate_name(gate), "status": [], "passed": [], "stability": []}
                )
                g["status"].append(gate["status"])
                g["passed"].append(bool(gate["passed"]))
                if gate.get("stability") is not None:
                    g["stability"].append(gate["stability"])
        for g in per_gate.values():
            fails = sum(not p for p in g["passed"])
            rec = {
                "name": "noise",
                "params": {
                    "tree": tree,
                    "scenario": scenario,
                    "gate": g["name"],
                    "samples": 200,
                    "num_runs": 3,
                    "reruns": reruns,
                },
                "figures": {
                    "failed": fails,
                    "rate": round(fails / reruns, 3),
                    "statuses": dict(Counter(g["status"])),
                    "mean_stability": round(statistics.fmean(g["stability"]), 3)
                    if g["stability"]
                    else None,
                    "stability_range": [min(g["stability"]), max(g["stability"])]
                    if g["stability"]
                    else None,
                    # reruns whose reports flag the gate (holds in < 90 % of reruns, or undecided)
                    "flagged": sum(
                        st < 0.9 or status == "undecided"
                        for st, status in zip(g["stability"], g["status"], strict=True)
                    )
                    if g["stability"]
                    else None,
                    "actual_agreement": round(agreement(g["status"]), 3),
                    "pass_fail_agreement": round(agreement([str(p) for p in g["passed"]]), 3),
                    "exit_1": sum(c == 1 for c in exits),
                    "wall_s_median": round(statistics.median(walls), 3),
                    "wall_s_range": [round(min(walls), 3), round(max(walls), 3)],
                },
                "cores": os.cpu_count(),
            }
            records.append(rec)
            if emit is not None:
                emit(rec)
    return records


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reruns", type=int, default=40)
    p.add_argument("--src", default=None, help="a tree's src folder to measure instead of this one")
    p.add_argument("--scenarios", nargs="*", choices=list(SCENARIOS), default=list(SCENARIOS))
    p.add_argument("--smoke", action="store_true", help="2 reruns of aa and ab")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="ci-evals-noise-") as d:
        scenarios = (
            ["aa", "ab"] if args.smoke and args.scenarios == list(SCENARIOS) else args.scenarios
        )
        measure(
            Path(d),
            2 if args.smoke else args.reruns,
            args.src,
            scenarios,
            emit=lambda rec: print(json.dumps(rec), flush=True),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
