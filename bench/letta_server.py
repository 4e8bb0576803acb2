"""Errors, retries and time at several concurrencies on a real Letta 0.16.8 server, and what the
agent judge costs per sample.

    scripts/letta-server.sh start && eval "$(scripts/letta-server.sh env)"
    python bench/letta_server.py [--samples 20] [--concurrency 1 4 8 16] [--no-retry]

Each level runs 20 samples once: the example's capital-agent.af (or, with ``--target echo``, an
echo agent exported from the server) graded by the shipped judge.af. ``--no-retry`` turns the import retries off, to show
what the server's deadlocks do without them. The judge's cost comes from the tokens Letta reports
for the judge agent (the fake LLM counts a token per 4 bytes of request, about what tiktoken
gives), priced at gpt-4o-mini's list price ($0.15 / $0.60 per million input / output tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402 - after the sys.path line

PRICE_IN, PRICE_OUT = 0.15e-6, 0.60e-6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument(
        "--no-retry", action="store_true", help="one import attempt, no fresh judge or agent"
    )
    ap.add_argument(
        "--target",
        choices=["capital", "echo"],
        default="capital",
        help="capital-agent.af (a custom tool, as in the examples) or an echo agent without tools",
    )
    args = ap.parse_args()
    if not os.environ.get("LETTA_BASE_URL"):
        print('start the server first: eval "$(scripts/letta-server.sh env)"', file=sys.stderr)
        return 2
    from letta_client import Letta

    from ci_evals.cli.app import main as cli
    from ci_evals.letta import agents as letta_agents
    from tests.test_letta_real import BASE, EXAMPLES, MODEL, llm_stats, suite_20

    if args.no_retry:
        letta_agents.IMPORT_TRIES = 1
    client = Letta(base_url=BASE, api_key="bench", timeout=300)
    tmp = Path(tempfile.mkdtemp(prefix="letta-bench-"))
    suite = suite_20(client, tmp, n=args.samples)
    doc = yaml.safe_load(suite.read_text())
    if (
        args.target == "capital"
    ):  # the example's agent, with its lookup tool: imports that upsert tools
        shutil.copy(EXAMPLES / "agent-judge" / "capital-agent.af", tmp)
        pairs = [
            json.loads(line)
            for line in (EXAMPLES / "agent-judge" / "dataset.jsonl").read_text().splitlines()
        ]
        rows = [{**pairs[i % len(pairs)], "id": f"q{i}"} for i in range(args.samples)]
        (tmp / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        doc["target"]["agent_file"] = "capital-agent.af"
        doc["graders"]["judge"]["prompt"] = "Is the answer the expected capital?"
        doc["gate"]["value"] = 0.0
    if args.no_retry:
        doc["graders"]["judge"]["max_retries"] = 0
    suite.write_text(yaml.safe_dump(doc, sort_keys=False))
    print(
        f"{args.samples} samples, target {args.target}, judge judge.af, model {MODEL}, "
        f"import retries {'off' if args.no_retry else 'on'}"
    )
    print(
        "| concurrency | wall s | s per sample | errored samples | retries | judge tokens in/out per sample "
        "| judge LLM calls per sample | judge $ per sample |"
    )
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
        judge = summary["usage"]["graders"].get("judge") or {
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }
        tin, tout = judge["prompt_tokens"] / n, judge["completion_tokens"] / n
        calls = (after["judge"] - before["judge"]) / n
        errored = sum(
            1
            for line in (out / "results.jsonl").read_text().splitlines()
            if (r := json.loads(line))["error"] or any(g["error"] for g in r["grades"].values())
        )
        print(
            f"| {conc} | {wall:.1f} | {wall / n:.2f} | {errored} of {n} | {summary['retries']} | "
            f"{tin:.0f} / {tout:.0f} | {calls:.1f} | {tin * PRICE_IN + tout * PRICE_OUT:.6f} |",
            flush=True,
        )
        left = summary.get("letta", {}).get("leftover_agents")
        if left:
            print(f"  leftover agents: {left}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
