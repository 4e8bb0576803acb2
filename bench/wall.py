"""The whole process as the user waits for it: ``ci-evals run`` timed from spawn to exit, beside the
run's own ``duration_s``, and bench/bare_client.py (the same calls from a bare aiohttp loop) timed
the same way, from spawn to exit (issue 41 item 7).

    python bench/wall.py                                  # this tree: N=50/C=50, 1,000/50, 5,000/200
    python bench/wall.py --tree before=/tmp/before/src --tree after=src --reps 5
    python bench/wall.py --smoke                          # seconds
    python bench/wall.py --cold                           # every run with an empty cache folder

Every repetition runs each case once for every tree and for the bare loop, in an order rotated
each repetition (a shared machine's speed moves within minutes), against one fake server
(tests/fakes/openai_server.py, its own process) at 100 ms a call. Figures per run: ``wall_s``
(spawn to exit), ``run_s`` (summary.json ``duration_s``), ``fixed_s`` = wall minus the network
time the calls need at that concurrency, 2·⌈N/C⌉·latency; ``import_s``, once per tree, is the sum
of ``python -X importtime``'s top-level imports in the 50-sample run (both processes). The last
lines give, per tree and case, median [min-max] of each figure and of ``bare_ratio`` (this run's
wall over the bare loop's in the same repetition). Targets: fixed_s ≤ 0.25 s at N=50;
bare_ratio ≤ 1.08 at N=1,000/C=50 and N=5,000/C=200.

Every tree is byte-compiled first (``compileall``), as an installed package is, and every process
runs without ``PYTHONDONTWRITEBYTECODE``, so the warm-up runs write the bytecode of the third-party
modules they import, as ``pip install`` does on a user's machine. With that variable set (this
machine's shell sets it) and a venv installed by uv (which compiles nothing), each run compiled
aiohttp, pydantic, yaml and jinja2 again: before 2026-11-28 this bench's figures carried that, 0.15 s
of the bare loop's 50-sample wall and 0.39 s of ci-evals' (bench/README.md, round 12).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # `tests.fakes` for the local OpenAI-compatible server
sys.path.insert(0, str(HERE))

from suites import llm_suite  # noqa: E402

CASES = [(50, 50), (1000, 50), (5000, 200)]
SMOKE_CASES = [(20, 20), (100, 50)]


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - t0, out


def ci_evals_run(
    tmp: Path,
    src: str | None,
    url: str,
    n: int,
    c: int,
    latency: float,
    tag: str,
    cold: bool = False,
) -> dict:
    """One ``ci-evals run`` as a new process (``python -m ci_evals``, ``src`` first on PYTHONPATH);
    ``cold``: with an empty cache folder, as on a fresh CI runner or in a new container."""
    suite = tmp / f"suite-{n}" / "suite.yaml"
    if not suite.exists():
        llm_suite(suite.parent, n)
    out = tmp / f"out-{tag}"
    env = {**os.environ, "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-bench"}
    if cold:  # no price memo, no compiled report template: what a run on a new machine does
        env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="cache-", dir=tmp)
    if src:
        env["PYTHONPATH"] = src
    wall, proc = _timed(
        [
            sys.executable,
            "-m",
            "ci_evals",
            "run",
            str(suite),
            "--output",
            str(out),
            "-q",
            "--no-cache",
            "--max-concurrent",
            str(c),
        ],
        env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"ci-evals run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {
        "wall_s": round(wall, 3),
        "run_s": summary["duration_s"],
        "fixed_s": round(wall - 2 * math.ceil(n / c) * latency, 3),
        "errored": summary["errors"]["total"],
    }


def bare_run(url: str, n: int, c: int, latency: float) -> dict:
    """bench/bare_client.py as a new process, timed from spawn to exit like ci-evals."""
    wall, proc = _timed(
        [sys.executable, str(HERE / "bare_client.py"), url, str(n), str(c), str(latency)],
        dict(os.environ),
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bare_client failed: {proc.stderr[-2000:]}")
    inner = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "wall_s": round(wall, 3),
        "run_s": inner["wall_s"],
        "fixed_s": round(wall - 2 * math.ceil(n / c) * latency, 3),
        "errored": inner["errored"],
    }


def import_seconds(tmp: Path, src: str | None, url: str, n: int, c: int) -> float:
    """The top-level imports of one ``ci-evals run`` (every process it forks), from ``-X importtime``."""
    suite = tmp / f"suite-{n}" / "suite.yaml"
    if not suite.exists():
        llm_suite(suite.parent, n)
    env = {**os.environ, "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-bench"}
    if src:
        env["PYTHONPATH"] = src
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "ci_evals",
            "run",
            str(suite),
            "--output",
            str(tmp / "out-importtime"),
            "-q",
            "--no-cache",
            "--max-concurrent",
            str(c),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    top = re.findall(r"^import time:\s+\d+ \|\s+(\d+) \| (\S)", proc.stderr, re.MULTILINE)
    return round(sum(int(us) for us, _ in top) / 1e6, 3)


def byte_compile(src: str | None) -> None:
    """Write the tree's ``.pyc`` files (an installed package has them; see the module docstring)."""
    if src:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", src], capture_output=True, check=True
        )


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def measure(
    trees: dict[str, str | None],
    cases: list[tuple[int, int]],
    reps: int,
    latency: float,
    emit=print,
    cold: bool = False,
) -> dict:
    """Interleaved repetitions of every case for every tree and the bare loop; returns the runs
    by (tree, case) and emits one JSON line per run, then one summary line per tree and case."""
    from tests.fakes.openai_server import spawn

    runs: dict[tuple[str, tuple[int, int]], list[dict]] = {}
    imports: dict[str, float] = {}
    proc, url = spawn(latency=latency)
    try:
        with tempfile.TemporaryDirectory(prefix="ci-evals-wall-") as d:
            tmp = Path(d)
            names = [*trees, "bare"]
            bare_run(url, *cases[0], latency)  # aiohttp's bytecode, page cache
            for name, src in trees.items():
                byte_compile(src)
                ci_evals_run(
                    tmp, src, url, *cases[0], latency, f"warm-{name}"
                )  # caches, page cache
                imports[name] = import_seconds(tmp, src, url, *cases[0])
            for rep in range(reps):
                order = names[rep % len(names) :] + names[: rep % len(names)]
                for case in cases:
                    figs = {}
                    for name in order:
                        if name == "bare":
                            figs[name] = bare_run(url, *case, latency)
                        else:
                            figs[name] = ci_evals_run(
                                tmp, trees[name], url, *case, latency, f"{name}-{case[0]}", cold
                            )
                    bare_wall = figs["bare"]["wall_s"]
                    for name, fig in figs.items():
                        fig["bare_ratio"] = round(fig["wall_s"] / bare_wall, 3)
                        runs.setdefault((name, case), []).append(fig)
                        emit(
                            json.dumps(
                                {
                                    "tree": name,
                                    "samples": case[0],
                                    "concurrency": case[1],
                                    "rep": rep,
                                    **fig,
                                }
                            )
                        )
    finally:
        proc.kill()
        proc.wait()
    for (name, (n, c)), figs in runs.items():
        emit(
            json.dumps(
                {
                    "tree": name,
                    "samples": n,
                    "concurrency": c,
                    "latency_s": latency,
                    "cold": cold,
                    "runs": len(figs),
                    "import_s": imports.get(name),
                    **{
                        k: spread([f[k] for f in figs])
                        for k in ("wall_s", "run_s", "fixed_s", "bare_ratio")
                    },
                    "errored": sum(f["errored"] for f in figs),
                }
            )
        )
    return {"runs": runs, "imports": imports}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=SRC",
        help="a src/ folder to measure, by name (default: this tree's, as 'this')",
    )
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, seconds")
    p.add_argument("--cases", nargs="*", default=None, metavar="N/C", help="e.g. 50/50 1000/50")
    p.add_argument(
        "--cold",
        action="store_true",
        help="every ci-evals run with an empty cache folder (XDG_CACHE_HOME), as on a fresh CI "
        "runner or in the image's new container: no price memo, no compiled report template",
    )
    args = p.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # every child writes bytecode (see above)
    trees = dict(t.split("=", 1) for t in args.tree) or {"this": str(HERE.parent / "src")}
    cases = (
        [tuple(int(x) for x in c.split("/")) for c in args.cases]
        if args.cases
        else (SMOKE_CASES if args.smoke else CASES)
    )
    measure(
        trees,
        cases,
        1 if args.smoke else args.reps,
        0.02 if args.smoke else 0.1,
        emit=lambda line: print(line, flush=True),
        cold=args.cold,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
