"""Run one suite through letta-evals (one released version, in its own venv) and through ci-evals,
on the same real Letta server, and read back what each graded.

A suite folder is copied and adapted only where letta-evals' own examples point elsewhere: the
target's ``base_url`` becomes this server, its ``model_handles`` this server's handle, and every
``.af`` file's model settings that handle (an agent judge's model is read from its .af). Both tools
then run the very same files. The model judges of both talk to a second instance of
tests/fakes/letta_llm.py (``OPENAI_BASE_URL``), so every score is deterministic.

letta-evals runs as an ordinary subprocess of its venv's ``letta-evals`` script. Offline, it needs:
a pricing file in ``LETTA_EVALS_CACHE_DIR`` (0.8+ fetches litellm's table otherwise; a fresh file
is never refetched), ``OPENAI_API_KEY``/``OPENAI_BASE_URL`` for its judges, and nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = Path(__file__).resolve().parent / "letta_evals_examples"
SUITES = Path(__file__).resolve().parent / "suites"
# letta-evals version -> the environment variable naming its venv (set by .ci/run)
VENVS = {
    "0.5.0": "CI_EVALS_LETTA_EVALS_05",
    "0.18.0": "CI_EVALS_LETTA_EVALS_018",
    "0.26.0": "CI_EVALS_LETTA_EVALS_026",
}
TIMEOUT = 900
# Concurrent .af imports of the same tools make Letta 0.16.8 stall on a loaded machine: both tools
# run few samples at a time (a CLI flag of each, the suites stay as written).
CONCURRENCY = "2"
# Cases run one after the other, letta-evals and ci-evals of a case at once (both wait on the
# server most of the time). Two cases at once (8 samples in flight) made a case run 3 times slower
# than alone on the loaded 2-core machine and past TIMEOUT: the server is the bottleneck.
CASE_WORKERS = int(os.environ.get("CI_EVALS_ORACLE_WORKERS", "1"))


@dataclass
class Outcome:
    """What one tool gave for one suite: exit code and per-sample grades."""

    rc: int
    scores: dict[tuple[str, str], float] = field(
        default_factory=dict
    )  # (sample id, grader) -> score
    graded_errors: dict[tuple[str, str], str] = field(
        default_factory=dict
    )  # grades that are errors
    sample_errors: dict[str, str] = field(default_factory=dict)  # sample id -> why it errored
    grading_errors: set[str] = field(default_factory=set)  # letta-evals 0.21+: errored by a grader
    output: str = ""
    seconds: float = 0.0


def venv_of(version: str) -> Path:
    var = VENVS[version]
    path = os.environ.get(var)
    if not path:
        raise RuntimeError(
            f"${var} is not set: the venv with letta-evals {version} (see docs/letta-evals-oracle.md)"
        )
    return Path(path)


def adapt(src: Path, dest: Path, base_url: str, handle: str) -> Path:
    """Copy a suite folder; point its target at ``base_url`` and every model at ``handle``."""
    shutil.copytree(src, dest)
    for suite in dest.glob("*.yaml"):
        doc = yaml.safe_load(suite.read_text())
        if not isinstance(doc, dict) or "target" not in doc:
            continue
        target = doc["target"]
        target["base_url"] = base_url
        if target.get("agent_file") or target.get("kind") == "letta_code":
            target["model_handles"] = [handle]
        # letta-evals 0.24+ runs a sample in a Modal sandbox when asked (a Modal account; ci-evals
        # refuses the block): both tools run the samples here instead.
        doc.pop("sandbox", None)
        suite.write_text(yaml.safe_dump(doc, sort_keys=False))
    provider, _, model = handle.partition("/")
    for af in dest.rglob("*.af"):
        doc = json.loads(af.read_text())
        for agent in doc.get("agents") or []:
            cfg = agent.get("llm_config")
            if isinstance(cfg, dict):
                cfg.update(
                    handle=handle,
                    model=model,
                    provider_name=provider,
                    model_endpoint=os.environ.get("LETTA_TEST_LLM_URL", "") + "/v1",
                    model_endpoint_type="openai",
                )
            if "model" in agent and agent["model"]:
                agent["model"] = handle
        af.write_text(json.dumps(doc))
    return dest


def env_for(judge_url: str, cache_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))
    }
    env.update(
        OPENAI_API_KEY="sk-fake-judge",
        OPENAI_BASE_URL=judge_url + "/v1",
        LETTA_EVALS_CACHE_DIR=str(cache_dir),
        NO_COLOR="1",
        PYTHONPATH=str(REPO / "src"),
    )
    env.pop("LETTA_API_KEY", None)
    return env


def pricing_file(cache_dir: Path) -> None:
    """litellm's pricing table, reduced to the fake's two models, fresh (letta-evals 0.8+ reads it)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    prices = {
        m: {
            "input_cost_per_token": 1.5e-07,
            "output_cost_per_token": 6e-07,
            "litellm_provider": "openai",
            "mode": "chat",
        }
        for m in ("gpt-4o-mini", "gpt-4.1-mini")
    }
    (cache_dir / "model_prices.json").write_text(json.dumps(prices))


def run_tool(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, float]:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0


def run_letta_evals(version: str, suite: Path, out: Path, env: dict[str, str]) -> Outcome:
    exe = venv_of(version) / "bin" / "letta-evals"
    env = {**env, "PYTHONPATH": ""}
    rc, text, secs = run_tool(
        [
            str(exe),
            "run",
            str(suite),
            "--output",
            str(out),
            "--display",
            "simple",
            "--max-concurrent",
            CONCURRENCY,
        ],
        suite.parent,
        env,
    )
    outcome = Outcome(rc=rc, output=text, seconds=secs)
    rows: list[dict[str, Any]] = []
    if (out / "results.jsonl").exists():  # 0.4-0.16: {"type": "result", "result": SampleResult}
        rows = [
            json.loads(x)["result"]
            for x in (out / "results.jsonl").read_text().splitlines()
            if x.strip()
        ]
    else:  # 0.17+: <model>.jsonl of SampleResult
        for path in sorted(out.glob("*.jsonl")):
            rows += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    for row in rows:
        sid = str(row["sample"]["id"] if "sample" in row else row["sample_id"])
        err = row.get("error")
        if err:
            outcome.sample_errors[sid] = (
                err.get("message", str(err)) if isinstance(err, dict) else str(err)
            )
            if isinstance(err, dict) and err.get("category") == "grading":
                outcome.grading_errors.add(sid)
        for name, grade in (row.get("grades") or {}).items():
            meta = grade.get("metadata") or {}
            if meta.get("error"):
                outcome.graded_errors[(sid, name)] = str(meta["error"])
            outcome.scores[(sid, name)] = float(grade["score"])
        if row.get("reward") is not None:  # 0.21+: the composed reward, ci-evals' metric "reward"
            outcome.scores[(sid, "reward")] = float(row["reward"]["score"])
    return outcome


def run_ci_evals(suite: Path, out: Path, env: dict[str, str], *args: str) -> Outcome:
    rc, text, secs = run_tool(
        [
            sys.executable,
            "-m",
            "ci_evals",
            "run",
            str(suite),
            "--output",
            str(out),
            "--no-cache",
            "--quiet",
            "--max-concurrent",
            CONCURRENCY,
            *args,
        ],
        suite.parent,
        env,
    )
    outcome = Outcome(rc=rc, output=text, seconds=secs)
    path = out / "results.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        row = json.loads(line)
        sid = str(row["sample_id"])
        if row.get("error"):
            outcome.sample_errors[sid] = str(row["error"])
        for name, grade in (row.get("grades") or {}).items():
            if grade.get("error"):
                outcome.graded_errors[(sid, name)] = str(grade["error"])
            if grade.get("score") is not None:  # an errored grade has none
                outcome.scores[(sid, name)] = float(grade["score"])
    return outcome
