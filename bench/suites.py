"""Generate the benchmark suites (datasets are written on demand, never committed)."""

from __future__ import annotations

import json
from pathlib import Path

TOOL_GRADERS = {
    "exact": {"kind": "tool", "function": "exact_match"},
    "has": {"kind": "tool", "function": "contains"},
    "regex": {"kind": "tool", "function": "regex_match", "extractor": "last_turn"},
    "ascii": {"kind": "tool", "function": "ascii_printable_only", "extractor": "all_assistant"},
}


def write_jsonl(path: Path, rows) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def replay_suite(folder: Path, n: int) -> Path:
    """A replay suite of ``n`` samples graded by four tool graders."""
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(
        folder / "dataset.jsonl",
        ({"id": i, "input": f"What is {i} + {i}?", "ground_truth": str(2 * i)} for i in range(n)),
    )
    write_jsonl(
        folder / "outputs.jsonl",
        ({"id": i, "output": f"The answer is {2 * i if i % 10 else i}."} for i in range(n)),
    )
    suite = {
        "name": f"replay-{n}",
        "dataset": "dataset.jsonl",
        "target": {"kind": "replay", "outputs": "outputs.jsonl"},
        "graders": TOOL_GRADERS,
        "gate": {"metric_key": "has", "metric": "accuracy", "op": "gte", "value": 0.8},
    }
    (folder / "suite.yaml").write_text(json.dumps(suite, indent=1), encoding="utf-8")
    return folder / "suite.yaml"


def llm_suite(folder: Path, n: int) -> Path:
    """A model target judged by a rubric grader; both call the OpenAI-compatible endpoint."""
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(
        folder / "dataset.jsonl",
        (
            {"id": i, "input": f"Question {i}: what is {i} + {i}?", "ground_truth": str(2 * i)}
            for i in range(n)
        ),
    )
    suite = {
        "name": f"llm-{n}",
        "dataset": "dataset.jsonl",
        "target": {"kind": "model", "model": "gpt-4o-mini", "system_prompt": "Answer briefly."},
        "graders": {
            "quality": {
                "kind": "rubric",
                "model": "gpt-4o-mini",
                "prompt": "Score 1 if the answer is correct.\nQ: {input}\nA: {submission}",
            }
        },
        "gate": {"metric_key": "quality", "op": "gte", "value": 0.0},
    }
    (folder / "suite.yaml").write_text(json.dumps(suite, indent=1), encoding="utf-8")
    return folder / "suite.yaml"
