"""Errors, retries and time at several concurrencies on a real Letta 0.16.8 server, and what the
agent judge costs per sample.

    scripts/letta-server.sh start && eval "$(scripts/letta-server.sh env)"
    python bench/letta_server.py [--samples 20] [--concurrency 1 4 8 16] [--no-retry]

Each level runs the 20-sample suite of tests/test_letta_real.py (an echo agent exported from the
server, graded by the shipped judge.af) once. ``--no-retry`` turns the import retries off, to show
what the server's deadlocks do without them. The judge's cost comes from the tokens Letta reports
for the judge agent (the fake LLM counts a token per 4 bytes of request, about what tiktoken
gives), priced at gpt-4o-mini's list price ($0.15 / $0.60 per million input / output tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PRICE_IN, PRICE_OUT = 0.15e-6, 0.60e-6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--no-retry", action="store_true", help="one import attempt, no fresh judge or agent")
    args = ap.parse_args()
    if not os.environ.get("LETTA_BASE_URL"):
        print('start the server first: eval "$(scripts/letta-server.sh env)"', file=sys.stderr)
        return 2
    from letta_client import Letta

    from ci_evals.cli import main as cli
    from ci_evals.targets import letta_agents
    from tests.test_letta_real import BASE, llm_stats, suite_20

    if args.no_retry:
        letta_agents.IMPORT_TRIES = 1
    client = Letta(base_url=BASE, api_key="bench", timeout=300)
    tmp = Path(tempfile.mkdtemp(prefix="letta-bench-"))
    suite = suite_20(client, tmp, n=args.samples)
    if args.no_retry:
        text = suite.read_text().replace("    model: ", "    max_retries: 0\n    model: ", 1)
        suite.write_text(text)
    print("| concurrency | wall s | s per sample | errored samples | retries | judge tokens in/out per sample "
          "| judge LLM calls per sample | judge $ per sample |")
    print("|---|---|---|---|---|---|---|---|")
    for conc in args.concurrency:
        out = tmp / f"c{conc}"
        before = llm_stats()
        t0 = time.perf_counter()
        cli(["run", str(suite), "--output", str(out), "--quiet", "--max-concurrent", str(conc)])
        wall = time.perf_counter() - t0
        after = llm_stats()
        summary = json.loads((out / "summary.json").read_text())
        n = summary["n_samples"]
        judge = summary["usage"]["graders"].get("judge") or {"prompt_tokens": 0, "completion_tokens": 0}
        tin, tout = judge["prompt_tokens"] / n, judge["completion_tokens"] / n
        calls = (after["judge"] - before["judge"]) / n
        errored = sum(1 for line in (out / "results.jsonl").read_text().splitlines()
                      if (r := json.loads(line))["error"] or any(g["error"] for g in r["grades"].values()))
        print(f"| {conc} | {wall:.1f} | {wall / n:.2f} | {errored} of {n} | {summary['retries']} | "
              f"{tin:.0f} / {tout:.0f} | {calls:.1f} | {tin * PRICE_IN + tout * PRICE_OUT:.6f} |", flush=True)
        left = summary.get("letta", {}).get("leftover_agents")
        if left:
            print(f"  leftover agents: {left}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
