"""summary.json: build it from the aggregator, write every report file into the results folder."""

from __future__ import annotations

import platform
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ci_evals.bounds import dumps
from ci_evals.results.files import Trust, records
from ci_evals.results.writer import write_text

SCHEMA_VERSION = 1


def versions(kinds: set[str]) -> dict[str, str]:
    """ci-evals, Python and the libraries this suite's graders use (so scores can be reproduced)."""
    from importlib.metadata import PackageNotFoundError, version

    import ci_evals

    out = {"ci_evals": ci_evals.__version__, "python": platform.python_version()}
    libs = ["pydantic"]
    if kinds & {"rubric", "model_judge", "score_model", "label_model", "model", "text_similarity"}:
        libs.append("openai")
    if kinds & {"agent", "letta_agent", "letta_judge"}:
        libs.append("letta-client")
    if "text_similarity" in kinds or "multi" in kinds:
        libs += ["rapidfuzz", "nltk", "rouge-score"]
    for lib in libs:
        try:
            out[lib] = version(lib)
        except PackageNotFoundError:
            pass
    return out


def _all_versions(suite, kinds: set[str], extra: dict[str, Any]) -> dict[str, str]:
    """Library versions, including what each grader reports about itself (e.g. WordNet)."""
    if suite is None and extra.get("versions"):
        return extra["versions"]
    out = versions(kinds)
    for slot in suite.graders.values() if suite else ():
        more = getattr(slot.grader, "versions", None)
        if callable(more):
            out.update(more())
    return out


def build_summary(
    suite,
    config: dict[str, Any],
    agg,
    *,
    started: datetime,
    duration: float,
    partial: bool,
    extra: dict[str, Any] | None = None,
    baseline=None,
    interrupted: str | None = None,
) -> dict[str, Any]:
    """The summary.json document (see the output contract in docs/reference.md).

    ``interrupted`` names the signal that stopped the run (``SIGINT``/``SIGTERM``/``SIGHUP``), if any.
    """
    from ci_evals.verdict import decide

    extra = extra or {}
    baseline = extra.get("baseline_obj", baseline)
    parts = agg.finish(baseline.gate_facts if baseline is not None else None)
    usage = {k: dict(v) for k, v in agg.usage.items()}
    target_usage = usage.pop("target", {"prompt_tokens": 0, "completion_tokens": 0})
    total = {
        "prompt_tokens": target_usage["prompt_tokens"]
        + sum(u["prompt_tokens"] for u in usage.values()),
        "completion_tokens": target_usage["completion_tokens"]
        + sum(u["completion_tokens"] for u in usage.values()),
    }
    kinds = {g["kind"] for g in config["graders"].values()} | {config["target"]["kind"]}
    summary: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "suite": suite.spec.name if suite else extra.get("suite"),
        "suite_file": str(suite.path) if suite else extra.get("suite_file"),
        "description": suite.spec.description if suite else extra.get("description"),
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": (started + timedelta(seconds=duration)).isoformat(timespec="seconds")
        if duration
        else datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(duration, 3),
        "verdict": None,
        "verdict_reason": None,
        "partial": partial,
        "target": config["target"],
        "num_runs": config["num_runs"],
        "reducer": config["reducer"],
        "n_samples": parts["n_samples"],
        "records": parts["records"],
        "gate": None,
        "gates": parts["gates"],
        "metrics": parts["metrics"],
    }
    if "models" in parts:
        summary["models"] = parts["models"]
    summary.update(
        {
            "errors": parts["errors"],
            "flaky": parts["flaky"],
            "usage": {
                "target": target_usage,
                "graders": usage,
                "total": total,
                "cost_usd": round(agg.cost_usd, 6) if agg.cost_usd is not None else None,
            },
            "cache": parts["cache"],
            "retries": parts["retries"],
            "versions": _all_versions(suite, kinds, extra),
            "config": config,
            "baseline": baseline.summary_block(summary_metrics=parts["metrics"])
            if baseline is not None
            else None,
        }
    )
    for k, v in extra.items():
        if k not in ("baseline_obj", "versions"):
            summary[k] = v
    if interrupted:
        summary["interrupted_by"] = interrupted
    summary["verdict"], summary["verdict_reason"] = decide(summary)
    summary["gate"] = {"passed": summary["verdict"] == "passed"}
    return summary


def iter_results(path: Path) -> Iterator[dict[str, Any]]:
    """Stream the records of this run's own results.jsonl (a torn line is skipped); see
    :mod:`ci_evals.results.files` for folders from elsewhere."""
    return records(path, Trust.OWN)


def write_outputs(out: Path, summary: dict[str, Any]) -> None:
    """summary.json, summary.md, junit.xml and report.html in ``out`` (results.jsonl is already
    there), each written whole to a temporary file and renamed, never through a symlink."""
    from ci_evals.reports.html import write_report
    from ci_evals.reports.junit import write_junit
    from ci_evals.reports.markdown import render_summary_md

    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "summary.json", dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n")
    results = out / "results.jsonl"
    write_text(out / "summary.md", render_summary_md(summary, iter_results(results)))
    write_junit(summary, iter_results(results), out / "junit.xml")
    write_report(out, summary)
