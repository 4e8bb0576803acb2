"""ci-evals benchmarks: one JSON object per benchmark on stdout (name, parameters, figures).

    python bench/run.py                 # everything (a few minutes on 2 cores)
    python bench/run.py --only scale    # one benchmark (start | wall | scale | overhead | graders | ratelimit | noise)
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

# (samples N, --max-concurrent C, requests per minute): issue 21's limits, small enough for minutes.
RATE_SCENARIOS = [(100, 10, 500), (300, 50, 3000), (40, 10, 50)]


def emit(name: str, params: dict, figures: dict) -> None:
    print(
        json.dumps({"name": name, "params": params, "figures": figures, "cores": os.cpu_count()}),
        flush=True,
    )


def measure(args: list[str], cwd: Path | None = None, env: dict | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE / "_measure.py"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"benchmark command failed: {args}\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_scale(tmp: Path, sizes: list[int]) -> None:
    for n in sizes:
        suite = replay_suite(tmp / f"replay-{n}", n)
        r = measure(
            ["run", str(suite), "--output", str(tmp / f"out-{n}"), "-q", "--max-concurrent", "50"]
        )
        lines = sum(1 for _ in (tmp / f"out-{n}" / "results.jsonl").open())
        emit(
            "scale",
            {"samples": n, "graders": 4, "target": "replay"},
            {
                "wall_s": r["wall_s"],
                "cpu_s": r["cpu_s"],
                "peak_rss_mb": r["peak_rss_mb"],
                "workers_peak_rss_mb": r["workers_peak_rss_mb"],
                "samples_per_s": round(n / r["wall_s"]),
                "results_lines": lines,
                "exit": r["exit"],
            },
        )


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
    emit(
        "start",
        {"validate_samples": n, "repeat": repeat},
        {
            "version_s": round(_time_cmd([*exe, "--version"], repeat), 3),
            "validate_s": round(_time_cmd([*exe, "validate", str(suite)], repeat), 3),
        },
    )


def run_llm_suite(tmp: Path, tag: str, n: int, c: int, url: str) -> tuple[dict, dict]:
    """ci-evals on bench/suites.py's llm_suite of ``n`` samples at ``--max-concurrent c`` against the
    fake server at ``url``, uncached: (the measured figures, summary.json)."""
    from suites import llm_suite

    suite = llm_suite(tmp / tag, n)
    out = tmp / f"{tag}-out-{c}"
    env = {**os.environ, "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-bench"}
    r = measure(
        ["run", str(suite), "--output", str(out), "-q", "--no-cache", "--max-concurrent", str(c)],
        env=env,
    )
    return r, json.loads((out / "summary.json").read_text())


def bench_overhead(tmp: Path, cases: list[tuple[int, int]], latency: float) -> None:
    """Model target + rubric judge against the local OpenAI-compatible server with injected latency.

    The ideal wall time is 2 * ceil(N / C) * latency: every sample makes two sequential calls and
    C samples are in flight. The server runs in its own process so it does not share our GIL.
    ``bare_ratio`` is bench/bare_client.py's on the same server: the same calls with no
    orchestration, what this harness allows any client.
    """
    import math

    import bare_client

    from tests.fakes.openai_server import spawn

    proc, url = spawn(latency=latency)
    try:
        for n, c in cases:
            r, summary = run_llm_suite(tmp, f"llm-{n}", n, c, url)
            ideal = 2 * math.ceil(n / c) * latency
            errors = summary["errors"]["total"]
            emit(
                "overhead",
                {"samples": n, "concurrency": c, "latency_s": latency, "calls": 2 * n},
                {
                    "ideal_s": ideal,
                    "run_s": summary["duration_s"],
                    "process_wall_s": r["wall_s"],
                    "run_ratio": round(summary["duration_s"] / ideal, 3),
                    "process_ratio": round(r["wall_s"] / ideal, 3),
                    "errors": errors,
                    "peak_rss_mb": r["peak_rss_mb"],
                    "bare_ratio": bare_client.measure(url, n, c, latency)["ratio"],
                },
            )
    finally:
        proc.kill()
        proc.wait()


def floor_s(n: int, c: int, latency: float, rpm: float) -> float:
    """The least wall time a limit allows: two sequential calls per sample, at most C samples in
    flight, and 2N calls at rpm/60 a second."""
    import math

    return max(2 * math.ceil(n / c) * latency, 2 * n / (rpm / 60))


def rate_figures(
    n: int,
    c: int,
    latency: float,
    rpm: float,
    wall_s: float,
    errored: int | None,
    stats: dict,
    cpu_s: float | None,
    peak_rss_mb: float | None,
) -> dict:
    """The rate-limit figures, the same for ci-evals and its peers (bench/peers_ratelimit.py)."""
    floor = floor_s(n, c, latency, rpm)
    calls = stats["accepted"] + stats["rejected"]
    return {
        "floor_s": round(floor, 2),
        "wall_s": round(wall_s, 2),
        "ratio": round(wall_s / floor, 3),
        "errored_samples": errored,
        "accepted_calls": stats["accepted"],
        "rejected_calls": stats["rejected"],
        "rejected_share": round(stats["rejected"] / calls, 3) if calls else 0.0,
        "max_in_flight": stats["max_in_flight"],
        "cpu_s": cpu_s,
        "peak_rss_mb": peak_rss_mb,
    }


def bench_ratelimit(tmp: Path, scenarios: list[tuple[int, int, float]], latency: float) -> None:
    """Model target + rubric judge against the fake server enforcing a request limit (OpenAI's 429s).

    Each scenario gets a fresh server process (its buckets and counts start full and at zero). The
    figures are those of bench/peers_ratelimit.py: wall time against the floor, errored samples
    (summary.json), accepted and rejected calls (the server's ``/_stats``), CPU-s and peak RSS of
    the ci-evals process.
    """
    from tests.fakes.openai_server import spawn, stats

    for n, c, rpm in scenarios:
        proc, url = spawn(latency=latency, rpm=rpm)
        try:
            r, summary = run_llm_suite(tmp, f"rl-{n}-{rpm:g}", n, c, url)
            figures = rate_figures(
                n,
                c,
                latency,
                rpm,
                r["wall_s"],
                summary["errors"]["total"],
                stats(url),
                r["cpu_s"],
                r["peak_rss_mb"],
            )
            figures.update(
                {
                    "run_s": summary["duration_s"],
                    "exit": r["exit"],
                    "verdict": summary.get("verdict"),
                    # what ci-evals itself reports (summary.json ``endpoints``), beside the server's count
                    "reported": [
                        {
                            k: e.get(k)
                            for k in (
                                "rejected",
                                "waited_s",
                                "concurrency",
                                "lowest_concurrency",
                                "rpm",
                                "rpm_from",
                            )
                        }
                        for e in summary.get("endpoints") or []
                    ],
                }
            )
            emit(
                "ratelimit",
                {
                    "tool": "ci-evals",
                    "samples": n,
                    "concurrency": c,
                    "rpm": rpm,
                    "latency_s": latency,
                    "calls": 2 * n,
                },
                figures,
            )
        finally:
            proc.kill()
            proc.wait()


def _texts(n: int, words: int = 50) -> list[tuple[str, str]]:
    """Deterministic pairs of ``words``-word English-like texts that overlap partly."""
    import random

    rng = random.Random(7)
    vocab = (
        "the a model agent answer question capital city river paris tokyo quick brown fox jumps over lazy "
        "dog evaluation score judge rubric sample grader metric signal noise value result test case pass "
        "fail report comment branch merge build review summary detail fast slow"
    ).split()
    pairs = []
    for _ in range(n):
        ref = [rng.choice(vocab) for _ in range(words)]
        hyp = [w if rng.random() < 0.7 else rng.choice(vocab) for w in ref]
        pairs.append((" ".join(hyp) + ".", " ".join(ref) + "."))
    return pairs


def bench_graders(n: int, metrics: list[str]) -> None:
    """text_similarity throughput per metric, and our grader's overhead vs the library called directly."""
    import asyncio

    from ci_evals.config.specs import Context
    from ci_evals.core.sample import Sample
    from ci_evals.core.trajectory import Trajectory
    from ci_evals.graders.base import build_grader
    from ci_evals.graders.text_similarity import default_tokens

    pairs = _texts(n)
    samples = [Sample(id=i, input="q", ground_truth=ref) for i, (_, ref) in enumerate(pairs)]
    traj = Trajectory()
    for metric in metrics:
        direct = _direct_metric(metric, default_tokens)
        direct(*pairs[0])  # load the library before timing
        t0 = time.perf_counter()
        for hyp, ref in pairs:
            direct(hyp, ref)
        t_direct = time.perf_counter() - t0

        grader = build_grader(
            "sim",
            {
                "type": "text_similarity",
                "name": "sim",
                "input": "{{ sample.output_text }}",
                "reference": "{{ item.ground_truth }}",
                "evaluation_metric": metric,
                "pass_threshold": 0.5,
            },
            Context(Path(".")),
        )

        async def go(grader=grader):
            await grader.start()
            await grader.grade(samples[0], pairs[0][0], traj)
            t = time.perf_counter()
            for sample, (hyp, _) in zip(samples, pairs, strict=True):
                await grader.grade(sample, hyp, traj)
            return time.perf_counter() - t

        t_ours = asyncio.run(go())
        emit(
            "graders",
            {"metric": metric, "pairs": n, "words": 50},
            {
                "pairs_per_s": round(n / t_ours),
                "direct_pairs_per_s": round(n / t_direct),
                "overhead_ratio": round(t_ours / t_direct, 3),
            },
        )


def _direct_metric(metric: str, tokens):
    """The library call our grader makes for ``metric``, without our wrapper."""
    if metric == "fuzzy_match":
        from rapidfuzz import fuzz, utils

        return lambda a, b: fuzz.WRatio(a, b, processor=utils.default_process) / 100.0
    if metric == "bleu":
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

        smooth = SmoothingFunction().method4
        return lambda a, b: sentence_bleu([tokens(b)], tokens(a), smoothing_function=smooth)
    if metric == "gleu":
        from nltk.translate.gleu_score import sentence_gleu

        return lambda a, b: sentence_gleu([tokens(b)], tokens(a))
    if metric == "meteor":
        from nltk.translate.meteor_score import meteor_score

        return lambda a, b: meteor_score([tokens(b)], tokens(a))
    from rouge_score.rouge_scorer import RougeScorer

    kind = {"rouge_l": "rougeL"}.get(metric, metric.replace("_", ""))
    scorer = RougeScorer([kind], use_stemmer=False)
    return lambda a, b: scorer.score(b, a)[kind].fmeasure


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
        if wanted is None or "wall" in wanted:
            # the whole process from spawn to exit, beside the run's duration_s and the bare loop (bench/wall.py)
            import wall

            res = wall.measure(
                {"this": str(HERE.parent / "src")},
                wall.SMOKE_CASES if args.smoke else wall.CASES,
                1 if args.smoke else 3,
                0.02 if args.smoke else 0.1,
                emit=lambda line: None,
            )
            for (tree, (n, c)), figs in res["runs"].items():
                emit(
                    "wall",
                    {
                        "tool": "ci-evals" if tree == "this" else tree,
                        "samples": n,
                        "concurrency": c,
                        "latency_s": 0.02 if args.smoke else 0.1,
                        "runs": len(figs),
                    },
                    {
                        **{
                            k: wall.spread([f[k] for f in figs])
                            for k in ("wall_s", "run_s", "fixed_s", "bare_ratio")
                        },
                        "import_s": res["imports"].get(tree),
                        "errored": sum(f["errored"] for f in figs),
                    },
                )
        if wanted is None or "scale" in wanted:
            bench_scale(tmp, [200] if args.smoke else [1_000, 10_000, 100_000])
        if wanted is None or "overhead" in wanted:
            cases = [(100, 50)] if args.smoke else [(1_000, 50), (5_000, 200)]
            bench_overhead(tmp, cases, 0.02 if args.smoke else 0.1)
            # C=200 again against a slower server (most providers are slower still): the client's CPU
            # for a wave of 200 calls is then well below one call's latency (bench/README.md, round 8)
            bench_overhead(
                tmp, [(100, 50)] if args.smoke else [(5_000, 200)], 0.05 if args.smoke else 0.25
            )
        if wanted is None or "graders" in wanted:
            metrics = ["fuzzy_match", "bleu", "gleu", "meteor", "rouge_1", "rouge_2", "rouge_l"]
            bench_graders(
                50 if args.smoke else 10_000, ["fuzzy_match", "rouge_l"] if args.smoke else metrics
            )
        if wanted is None or "ratelimit" in wanted:
            scenarios = [(20, 5, 600)] if args.smoke else RATE_SCENARIOS
            bench_ratelimit(tmp, scenarios, 0.05 if args.smoke else 0.3)
        if wanted is None or "noise" in wanted:
            # regression gates on a noisy judge: A/A false alarms, A/B power, stability (bench/noise.py)
            import noise

            (tmp / "noise").mkdir()
            noise.measure(
                tmp / "noise",
                2 if args.smoke else 40,
                scenarios=("aa", "ab") if args.smoke else noise.SCENARIOS,
                emit=lambda rec: emit(rec["name"], rec["params"], rec["figures"]),
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
