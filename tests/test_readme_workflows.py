"""The README is a walkthrough whose workflows run: what it is, the quick start, "add it to your
repository", then the reference in docs/. Every workflow snippet in it is a complete workflow that
lints clean (actionlint and GitHub's workflow schema), like docs/workflow-example.yml, and the one
it shows from ``ci-evals init`` is exactly what init writes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ci_evals.cli.scaffold import planned_files

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
REFERENCE = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent
WORKFLOWS = re.findall(r"```yaml\n(.*?)```", README, flags=re.S)


def test_the_readme_reads_in_the_order_a_new_user_needs():
    heads = re.findall(r"^## (.+)$", README, flags=re.M)
    assert heads[:4] == ["Quick start", "Add it to your repository", "Reference", "GitHub Action"]
    assert README.startswith(
        "# ci-evals\n\nA CI-native evaluation gate for LLM agents and prompts."
    )
    walkthrough = README.split("## Add it to your repository", 1)[1].split("## Reference", 1)[0]
    for fact in (
        "ci-evals init",
        "Secrets and variables",
        "OPENAI_API_KEY",
        "`ci-evals-results/`",
        "`.ci-evals-cache/`",
        "gh run list --workflow\n   evals.yml",
        "--only-failed",
    ):
        assert fact in walkthrough, fact


def test_the_readme_has_three_workflows_each_complete():
    assert len(WORKFLOWS) == 3
    for text in WORKFLOWS:
        wf = yaml.safe_load(text)
        assert {"name", True, "jobs"} <= set(wf), text[:80]  # YAML 1.1 reads `on` as True


@pytest.mark.parametrize("index", range(3))
def test_every_readme_workflow_lints_clean(tmp_path, index):
    path = tmp_path / f"readme-{index}.yml"
    path.write_text(WORKFLOWS[index], encoding="utf-8")
    lint = subprocess.run([str(BIN / "actionlint"), str(path)], capture_output=True, text=True)
    assert (lint.returncode, lint.stdout) == (0, ""), lint.stdout
    schema = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
    )
    assert schema.returncode == 0, schema.stdout


def test_the_workflow_the_readme_shows_is_the_one_init_writes():
    assert WORKFLOWS[0] == planned_files("model")[".github/workflows/evals.yml"]


def _anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("doc", ["README.md", "docs/reference.md"])
def test_links_into_the_reference_land_on_a_heading(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    anchors = {_anchor(h) for h in re.findall(r"^#+ (.+)$", REFERENCE, flags=re.M)}
    target = "docs/reference.md#" if doc == "README.md" else "#"
    links = re.findall(r"\]\(" + re.escape(target) + r"([^)]+)\)", text)
    assert links and all(link in anchors for link in links), [
        link for link in links if link not in anchors
    ]


def test_the_reference_keeps_every_section_the_readme_had():
    heads = re.findall(r"^##+ (.+)$", REFERENCE, flags=re.M)
    assert heads == [
        "A suite file",
        "Top-level keys",
        "Targets",
        "Graders",
        "Extractors",
        "Gates",
        "Dataset",
        "Command line",
        "Outputs",
        "report.html",
        "Security",
        "Performance",
        "Coming from letta-evals",
        "Coming from OpenAI Evals",
    ]
