"""Issue 37, lows in the docs: docs/workflow-example.yml kept no LLM response cache (the README's
workflow and `init`'s do), and the Action docs' list of the results folder's files left out
report.html."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs/workflow-example.yml"


def test_the_example_workflow_restores_and_saves_the_llm_cache_around_the_run():
    steps = yaml.safe_load(EXAMPLE.read_text())["jobs"]["evals"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    restore, run, save = (
        uses.index("actions/cache/restore@v5"),
        uses.index("OWNER/ci-evals@v1"),
        uses.index("actions/cache/save@v5"),
    )
    assert restore < run < save
    assert steps[restore]["with"] == {
        "path": ".ci-evals-cache",
        "key": "ci-evals-cache-${{ github.run_id }}-${{ github.run_attempt }}",
        "restore-keys": "ci-evals-cache-",
    }
    assert steps[save]["with"] == {
        "path": ".ci-evals-cache",
        "key": "ci-evals-cache-${{ github.run_id }}-${{ github.run_attempt }}",
    }
    assert steps[save]["if"] == "always()"  # the calls of a failed gate were paid for too
    lint = subprocess.run(
        [str(Path(sys.executable).parent / "actionlint"), str(EXAMPLE)],
        capture_output=True,
        text=True,
    )
    assert (lint.returncode, lint.stdout) == (0, "")


def test_the_action_docs_list_every_file_of_the_results_folder():
    text = (ROOT / "docs/github-action.md").read_text()
    listed = re.search(r"- \*\*Files\*\* in `output-dir`: (.*?)\n\n", text, re.S).group(1)
    assert [
        f
        for f in ("summary.json", "results.jsonl", "summary.md", "junit.xml", "report.html")
        if f"`{f}`" not in listed
    ] == []
