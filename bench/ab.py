"""A/B two ci-evals source trees in one sitting, alternately, and print median [min-max] per figure.

    python bench/ab.py --base /tmp/main-src               # this tree's src/ against another src/
    python bench/ab.py --base A/src --new B/src --reps 5 overhead1000 ratelimit500
    python bench/ab.py --base /tmp/main-src --smoke       # seconds
    python bench/ab.py --base /tmp/main-src --bare overhead5000   # and bench/bare_client.py's floor

On a shared machine a figure moves with the load; two trees measured in the same sitting, in
alternating order (swapped each repetition), can still be compared. A tree is chosen through
``PYTHONPATH`` for the measured process (bench/_measure.py), so both run with this venv's
libraries. Scenarios: ``overhead1000`` (N=1,000, C=50), ``overhead5000`` (N=5,000, C=200), both
against one fake server at 100 ms; ``ratelimit500`` (N=100, C=10, 500 rpm, 300 ms, a fresh server
each run). One JSON line per run, then one summary line per scenario and tree. ``--bare`` adds
bench/bare_client.py (the same calls from a bare aiohttp loop: what the harness allows any client)
to each repetition of an overhead scenario, as the tree ``bare``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import bare_client  # noqa: E402
import run as bench  # noqa: E402

SCENARIOS = {
    "overhead1000": (1000, 50, 0.1, None),
    "overhead5000": (5000, 200, 0.1, None),
    "ratelimit500": (100, 10, 0.3, 500),
}
SMOKE = {
    "overhead1000": (100, 50, 0.02, None),
    "overhead5000": (200, 100, 0.02, None),
    "ratelimit500": (20, 5, 0.05, 600),
}


def one(tmp: Path, tag: str, scenario: tuple, url: str | None) -> dict:
    """One measured run of ``scenario``: ratio to the ideal (or floor), CPU-s, wall, errored samples."""
    from tests.fakes.openai_server import spawn, stats

    n, c, latency, rpm = scenario
    if rpm is None:
        r, s = bench.run_llm_suite(tmp, tag, n, c, url)
        return {
            "ratio": round(s["duration_s"] / (2 * math.ceil(n / c) * latency), 3),
            "cpu_s": r["cpu_s"],
            "wall_s": r["wall_s"],
            "errored": s["errors"]["total"],
        }
    proc, rl_url = spawn(latency=latency, rpm=rpm)
    try:
        r, s = bench.run_llm_suite(tmp, tag, n, c, rl_url)
        f = bench.rate_figures(
            n,
            c,
            latency,
            rpm,
            r["wall_s"],
            s["errors"]["total"],
            stats(rl_url),
            r["cpu_s"],
            r["peak_rss_mb"],
        )
    finally:
        proc.kill()
        proc.wait()
    return {
        "ratio": f["ratio"],
        "cpu_s": r["cpu_s"],
        "wall_s": f["wall_s"],
        "errored": f["errored_samples"],
        "rejected": f["rejected_calls"],
    }


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", required=True, help="the src/ folder of the tree to compare against")
    p.add_argument(
        "--new",
        default=str(HERE.parent / "src"),
        help="the src/ folder measured as 'new' (this tree's)",
    )
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, seconds")
    p.add_argument(
        "--bare", action="store_true", help="also measure bench/bare_client.py (overhead scenarios)"
    )
    p.add_argument("scenarios", nargs="*", help=f"any of {', '.join(SCENARIOS)} (default: all)")
    args = p.parse_args()
    args.scenarios = args.scenarios or list(SCENARIOS)
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenario {unknown[0]!r}: choose from {', '.join(SCENARIOS)}")
    table = SMOKE if args.smoke else SCENARIOS
    trees = {"base": args.base, "new": args.new}
    from tests.fakes.openai_server import spawn

    runs: dict[tuple[str, str], list[dict]] = {}
    proc, url = spawn(latency=0.02 if args.smoke else 0.1)
    try:
        with tempfile.TemporaryDirectory(prefix="ci-evals-ab-") as d:
            for rep in range(args.reps):
                order = ["base", "new"] if rep % 2 == 0 else ["new", "base"]
                for name in args.scenarios:
                    bare_too = args.bare and table[name][3] is None
                    for tree in order + (["bare"] if bare_too else []):
                        if tree == "bare":
                            fig = bare_client.measure(url, *table[name][:3])
                        else:
                            os.environ["PYTHONPATH"] = trees[tree]
                            fig = one(Path(d), f"{name}-{tree}-{rep}", table[name], url)
                        runs.setdefault((name, tree), []).append(fig)
                        print(
                            json.dumps({"scenario": name, "tree": tree, "rep": rep, **fig}),
                            flush=True,
                        )
    finally:
        proc.kill()
        proc.wait()
    for (name, tree), figs in runs.items():
        print(
            json.dumps(
                {
                    "scenario": name,
                    "tree": tree,
                    "runs": len(figs),
                    **{k: spread([f[k] for f in figs]) for k in ("ratio", "cpu_s", "wall_s")},
                    "errored": sum(f["errored"] for f in figs),
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
