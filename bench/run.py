"""ci-evals benchmarks: one JSON object per benchmark on stdout (name, parameters, figures).

    python bench/run.py                 # everything (a few minutes on 2 cores)
    python bench/run.py --only scale    # one benchmark
    python bench/run.py --smoke         # seconds; what CI runs so the benchmarks cannot rot

See bench/README.md for what each measures and the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # `tests.fakes` for the local OpenAI-compatible server
sys.path.insert(0, str(HERE))

from suites import replay_suite  # noqa: E402


def emit(name: str, params: dict, figures: dict) -> None:
    print(json.dumps({"name": name, "params": params, "figures": figures, "cores": os.cpu_count()}), flush=True)


def measure(args: list[str], cwd: Path | None = None) -> dict:
    out = subprocess.run([sys.executable, str(HERE / "_measure.py"), *args], capture_output=True, text=True,
                         cwd=cwd, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark command failed: {args}\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_scale(tmp: Path, sizes: list[int]) -> None:
    for n in sizes:
        suite = replay_suite(tmp / f"replay-{n}", n)
        r = measure(["run", str(suite), "--output", str(tmp / f"out-{n}"), "-q", "--max-concurrent", "50"])
        lines = sum(1 for _ in (tmp / f"out-{n}" / "results.jsonl").open())
        emit("scale", {"samples": n, "graders": 4, "target": "replay"},
             {"wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"], "samples_per_s": round(n / r["wall_s"]),
              "results_lines": lines, "exit": r["exit"]})


def _time_cmd(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_start(tmp: Path, repeat: int, n: int) -> None:
    exe = [sys.executable, "-m", "ci_evals"]
    suite = replay_suite(tmp / f"validate-{n}", n)
    emit("start", {"validate_samples": n, "repeat": repeat},
         {"version_s": round(_time_cmd([*exe, "--version"], repeat), 3),
          "validate_s": round(_time_cmd([*exe, "validate", str(suite)], repeat), 3)})


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--smoke", action="store_true", help="tiny sizes, seconds")
    p.add_argument("--only", nargs="*", default=None)
    args = p.parse_args()
    wanted = set(args.only) if args.only else None
    with tempfile.TemporaryDirectory(prefix="ci-evals-bench-") as d:
        tmp = Path(d)
        if wanted is None or "start" in wanted:
            bench_start(tmp, 3 if args.smoke else 7, 1000 if args.smoke else 10_000)
        if wanted is None or "scale" in wanted:
            bench_scale(tmp, [200] if args.smoke else [1_000, 10_000, 100_000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
