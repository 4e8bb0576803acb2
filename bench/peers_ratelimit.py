"""Optional: promptfoo and inspect_ai against the same rate-limited fake server as `run.py --only ratelimit`.

Not run in CI (it needs node and a second venv). Each peer runs the equivalent suite: a model call
("Answer briefly." + the question) and an LLM-rubric judge call per sample, at the same concurrency,
against the fake OpenAI server in its own process with the same latency and request limit. It prints
one JSON object per (tool, scenario) with the figures of `bench/run.py --only ratelimit`.

    npm install --prefix /tmp/pf promptfoo@0.121.20          # not committed
    python3.11 -m venv /work/venvs/inspect && /work/venvs/inspect/bin/pip install inspect_ai==0.3.285 openai
    python bench/peers_ratelimit.py --promptfoo /tmp/pf/node_modules/.bin/promptfoo \\
        --inspect /work/venvs/inspect/bin/inspect [--smoke] [--scenario 100,10,500] [--timeout-factor 5]

The paths may come from PROMPTFOO_BIN and INSPECT_BIN instead; a peer without a path is skipped
with a line saying so. CPU-s and peak RSS are those of the peer's process tree (``RUSAGE_CHILDREN``
of a wrapper process); a run that passes ``timeout-factor × floor`` is killed and reported with
``"timed_out": true``. Errored samples: promptfoo's ``stats.errors``; inspect_ai's samples with an
error, plus those missing from its log. inspect_ai runs with its adaptive connections (its default)
capped at the concurrency (``--adaptive-connections 1-C``) and ``--max-samples C``; promptfoo with
``-j C``; both with their default retry policies.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Reached by the fake server process as ``bench.peers_ratelimit:respond`` (keep imports light).
RESPONDER = "bench.peers_ratelimit:respond"


def respond(req: dict) -> object:
    """The fake's replies for the peers' judges: promptfoo's llm-rubric wants JSON with ``pass``,
    inspect_ai's model_graded_qa a ``GRADE: C`` line; the model target gets the default echo."""
    from tests.fakes.openai_server import default_responder, prompt_text

    text = prompt_text(req)
    if "<Rubric>" in text:
        return {"reason": "the answer is correct", "pass": True, "score": 1.0}
    if "GRADE: $LETTER" in text:
        return "The submission is correct.\nGRADE: C"
    return default_responder()(req)


def questions(n: int) -> list[tuple[str, str]]:
    """The dataset of bench/suites.py's llm_suite: (input, ground truth)."""
    return [(f"Question {i}: what is {i} + {i}?", str(2 * i)) for i in range(n)]


def promptfoo_cmd(exe: str, work: Path, url: str, n: int, c: int) -> tuple[list[str], Path]:
    provider = {
        "id": "openai:chat:gpt-4o-mini",
        "config": {"apiBaseUrl": url, "apiKey": "sk-bench"},
    }
    prompt = json.dumps(
        [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "{{question}}"},
        ]
    )
    config = {
        "description": f"ratelimit-{n}",
        "prompts": [prompt],
        "providers": [provider],
        "defaultTest": {
            "options": {"provider": provider},
            "assert": [
                {"type": "llm-rubric", "value": "Score 1 if the answer is correct. Q: {{question}}"}
            ],
        },
        "tests": [{"vars": {"question": q}} for q, _ in questions(n)],
    }
    (work / "promptfooconfig.json").write_text(json.dumps(config), encoding="utf-8")
    out = work / "promptfoo-out.json"
    return [
        exe,
        "eval",
        "-c",
        str(work / "promptfooconfig.json"),
        "-j",
        str(c),
        "--no-cache",
        "--no-table",
        "--no-write",
        "--no-progress-bar",
        "-o",
        str(out),
    ], out


def promptfoo_errors(out: Path) -> int | None:
    try:
        return int(json.loads(out.read_text())["results"]["stats"]["errors"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


INSPECT_TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import model_graded_qa
from inspect_ai.solver import generate, system_message

ROWS = {rows!r}


@task
def ratelimit():
    return Task(dataset=[Sample(input=q, target=t) for q, t in ROWS],
                solver=[system_message("Answer briefly."), generate()], scorer=model_graded_qa())
"""


def inspect_cmd(exe: str, work: Path, url: str, n: int, c: int) -> tuple[list[str], Path]:
    (work / "rl_task.py").write_text(INSPECT_TASK.format(rows=questions(n)), encoding="utf-8")
    logs = work / "inspect-logs"
    return [
        exe,
        "eval",
        "rl_task.py",
        "--model",
        "openai/gpt-4o-mini",
        "--adaptive-connections",
        f"1-{c}",
        "--max-samples",
        str(c),
        "--log-dir",
        str(logs),
        "--log-format",
        "json",
        "--display",
        "none",
        "--no-fail-on-error",
    ], logs


def inspect_errors(logs: Path, n: int) -> int | None:
    files = sorted(logs.glob("*.json"))
    if not files:
        return None
    log = json.loads(files[-1].read_text())
    samples = log.get("samples") or []
    # a sample missing from the log never finished (the eval stopped early): errored too
    return sum(1 for s in samples if s.get("error")) + max(0, n - len(samples))


def measured(cmd: list[str], env: dict, cwd: Path, timeout: float) -> dict:
    """Run ``cmd`` under a wrapper process; its wall time, the tree's CPU-s and peak RSS, exit code."""
    wrapper = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--measure-child",
        str(timeout),
        "--",
        *cmd,
    ]
    out = subprocess.run(wrapper, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"measuring {cmd[0]} failed:\n{out.stderr[-2000:]}") from None


def measure_child(timeout: float, cmd: list[str]) -> None:
    """The wrapper: run ``cmd`` in its own session, kill the session at ``timeout``, print figures."""
    t0 = time.perf_counter()
    log = open(os.environ.get("PEER_LOG", os.devnull), "w")  # noqa: SIM115 - closed at exit
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    timed_out = False
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        rc = proc.wait()
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "exit": rc,
                "wall_s": round(wall, 3),
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
                "timed_out": timed_out,
            }
        )
    )


def run_peer(
    tool: str, exe: str, n: int, c: int, rpm: float, latency: float, factor: float
) -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE))
    from run import emit, floor_s, rate_figures

    from tests.fakes.openai_server import spawn, stats

    proc, url = spawn(latency=latency, rpm=rpm, responder=RESPONDER)
    try:
        with tempfile.TemporaryDirectory(prefix=f"rl-{tool}-") as d:
            work = Path(d)
            env = {
                **os.environ,
                "OPENAI_BASE_URL": url,
                "OPENAI_API_KEY": "sk-bench",
                "HOME": str(work),
                "PROMPTFOO_DISABLE_TELEMETRY": "1",
                "PROMPTFOO_DISABLE_UPDATE": "1",
                "PROMPTFOO_DISABLE_SHARING": "1",
                "PEER_LOG": str(work / "peer.log"),
            }
            build = promptfoo_cmd if tool == "promptfoo" else inspect_cmd
            cmd, out = build(exe, work, url, n, c)
            r = measured(cmd, env, work, factor * floor_s(n, c, latency, rpm) + 60)
            errored = promptfoo_errors(out) if tool == "promptfoo" else inspect_errors(out, n)
            figures = rate_figures(
                n, c, latency, rpm, r["wall_s"], errored, stats(url), r["cpu_s"], r["peak_rss_mb"]
            )
            figures.update({"exit": r["exit"], "timed_out": r["timed_out"]})
            if errored is None:
                figures["log_tail"] = (work / "peer.log").read_text(errors="replace")[-600:]
            emit(
                "ratelimit",
                {
                    "tool": tool,
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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--measure-child"]:
        measure_child(float(argv[1]), argv[3:])
        return 0
    sys.path.insert(0, str(HERE))
    from run import RATE_SCENARIOS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--promptfoo", default=os.environ.get("PROMPTFOO_BIN"), help="the promptfoo executable"
    )
    p.add_argument(
        "--inspect", default=os.environ.get("INSPECT_BIN"), help="inspect_ai's `inspect` executable"
    )
    p.add_argument("--smoke", action="store_true", help="one tiny scenario (seconds)")
    p.add_argument(
        "--scenario", action="append", default=None, help="N,C,RPM (repeatable); default run.py's"
    )
    p.add_argument("--only", choices=["promptfoo", "inspect"], help="one peer")
    p.add_argument(
        "--timeout-factor", type=float, default=5.0, help="kill a peer after this × floor + 60 s"
    )
    args = p.parse_args(argv)
    if args.scenario:
        scenarios = [
            tuple(float(x) if i == 2 else int(x) for i, x in enumerate(s.split(",")))
            for s in args.scenario
        ]
    else:
        scenarios = [(20, 5, 600)] if args.smoke else RATE_SCENARIOS
    latency = 0.05 if args.smoke else 0.3
    for tool, exe in (("promptfoo", args.promptfoo), ("inspect", args.inspect)):
        if args.only and tool != args.only:
            continue
        if not exe:
            print(
                f"skipped {tool}: no path given (--{tool} or {tool.upper()}_BIN)", file=sys.stderr
            )
            continue
        for n, c, rpm in scenarios:
            run_peer(tool, exe, n, c, rpm, latency, args.timeout_factor)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
