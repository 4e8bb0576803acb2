"""``ci-evals init``: the files it writes, that they run offline at once, that the workflow lints
clean, and that running it again never clobbers what is there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ci_evals.cli.app import main
from tests.fakes.openai_server import FakeOpenAI

BIN = Path(sys.executable).parent
COMMAND_FILES = [
    ".github/workflows/evals.yml",
    ".gitignore",
    "evals/agent.py",
    "evals/custom_evaluators.py",
    "evals/dataset.jsonl",
    "evals/suite.yaml",
]


def tree(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".git/" not in p.relative_to(root).as_posix() + "/"
    )


def init(root: Path, *args: str) -> int:
    return main(["init", str(root), *args])


def test_init_in_an_empty_folder_writes_the_starter_files_and_says_what_next(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    assert tree(tmp_path) == COMMAND_FILES
    assert capsys.readouterr().out.splitlines() == [
        "ci-evals init (target: command)",
        "  wrote   evals/suite.yaml",
        "  wrote   evals/dataset.jsonl",
        "  wrote   evals/custom_evaluators.py",
        "  wrote   evals/agent.py",
        "  wrote   .github/workflows/evals.yml",
        "  .gitignore: added .ci-evals-cache/, ci-evals-results/, ci-evals-results-rerun/",
        "Next:",
        "  ci-evals run evals/suite.yaml          # runs offline now; then put your agent in evals/agent.py",
        "  in .github/workflows/evals.yml, replace OWNER with the account that hosts ci-evals",
        "  commit evals/, .github/workflows/evals.yml and .gitignore, push, open a pull request",
    ]
    assert (tmp_path / ".gitignore").read_text() == (
        "# ci-evals: results (and --only-failed re-runs), LLM "
        "response cache\n.ci-evals-cache/\nci-evals-results/\n"
        "ci-evals-results-rerun/\n"
    )
    assert len((tmp_path / "evals/dataset.jsonl").read_text().splitlines()) == 5


def test_what_init_writes_runs_offline_at_once_and_passes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["init", "--target", "command"]) == 0
    assert main(["run", "evals/suite.yaml", "-q"]) == 0
    summary = json.loads((tmp_path / "ci-evals-results/summary.json").read_text())
    assert (summary["verdict"], summary["n_samples"], summary["errors"]["total"]) == (
        "passed",
        5,
        0,
    )
    assert {k: m["pass_rate"] for k, m in summary["metrics"].items()} == {
        "answer": 1.0,
        "concise": 1.0,
    }
    assert capsys.readouterr().out.splitlines()[-2] == "starter: PASSED (1 of 1 gates passed)"


def test_a_broken_sample_fails_the_starter_gate(tmp_path, monkeypatch):
    """The gate bites: two wrong answers of five bring accuracy to 0.6 < 0.8."""
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    agent = tmp_path / "evals/agent.py"
    agent.write_text(
        agent.read_text()
        .replace('"Tokyo is the capital of Japan."', '"Kyoto."')
        .replace('"6 * 7 = 42"', '"6 * 7 = 40"')
    )
    assert main(["run", "evals/suite.yaml", "-q"]) == 1
    summary = json.loads((tmp_path / "ci-evals-results/summary.json").read_text())
    assert (summary["verdict"], summary["metrics"]["answer"]["pass_rate"]) == ("failed", 0.6)


@pytest.mark.parametrize("target", ["command", "model", "letta", "http"])
def test_every_target_validates_offline_and_its_workflow_lints_clean(tmp_path, target, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert init(tmp_path, "--target", target) == 0
    assert main(["validate", "evals/suite.yaml"]) == 0
    workflow = ".github/workflows/evals.yml"
    lint = subprocess.run([str(BIN / "actionlint"), workflow], capture_output=True, text=True)
    assert (lint.returncode, lint.stdout) == (0, ""), lint.stdout
    schema = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", workflow],
        capture_output=True,
        text=True,
    )
    assert schema.returncode == 0 and "ok -- validation done" in schema.stdout, schema.stdout
    secrets = {
        "command": [],
        "model": ["OPENAI_API_KEY"],
        "letta": ["LETTA_API_KEY"],
        "http": ["AGENT_TOKEN"],
    }
    text = (tmp_path / workflow).read_text()
    assert [
        s
        for s in ("OPENAI_API_KEY", "LETTA_API_KEY", "AGENT_TOKEN")
        if f"{s}: ${{{{ secrets.{s} }}}}" in text and f"# {s}" not in text
    ] == secrets[target]


def test_the_workflow_has_every_step_a_gate_needs(tmp_path):
    assert init(tmp_path) == 0
    wf = yaml.safe_load((tmp_path / ".github/workflows/evals.yml").read_text())
    steps = wf["jobs"]["evals"]["steps"]
    uses = [s.get("uses") for s in steps]
    assert uses == [
        "actions/checkout@v6",
        "actions/cache/restore@v5",
        None,
        "OWNER/ci-evals@v1",
        "actions/cache/save@v5",
        "actions/upload-artifact@v6",
    ]
    assert steps[0]["with"] == {"persist-credentials": False}
    assert steps[1]["with"]["path"] == steps[4]["with"]["path"] == ".ci-evals-cache"
    assert steps[4]["if"] == "always()" and steps[5]["if"] == "always()"
    assert (
        "gh run list --workflow evals.yml --branch main" in steps[2]["run"]
    )  # this file's own name
    assert (
        steps[3]["with"]["suite"] == "evals/**/suite.yaml"
        and "baseline" in steps[3]["with"]["baseline"]
    )
    assert wf["permissions"] == {"contents": "read", "pull-requests": "write", "actions": "read"}
    assert wf[True] == {
        "push": {"branches": ["main"]},
        "pull_request": None,
    }  # YAML 1.1 reads `on` as True


def test_running_init_again_clobbers_nothing_and_adds_no_gitignore_line_twice(tmp_path, capsys):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals/suite.yaml").write_text("name: mine\n")
    (tmp_path / ".gitignore").write_text("node_modules/\n/ci-evals-results")  # no final newline
    assert init(tmp_path) == 0
    assert (tmp_path / "evals/suite.yaml").read_text() == "name: mine\n"
    assert (tmp_path / ".gitignore").read_text() == (
        "node_modules/\n/ci-evals-results\n\n# ci-evals: results (and "
        "--only-failed re-runs), LLM response cache\n.ci-evals-cache/\n"
        "ci-evals-results-rerun/\n"
    )
    out = capsys.readouterr().out
    assert "  skipped evals/suite.yaml (already there; --force overwrites it)\n" in out
    assert "  .gitignore: added .ci-evals-cache/, ci-evals-results-rerun/\n" in out
    before = {p: (tmp_path / p).read_bytes() for p in tree(tmp_path)}
    assert init(tmp_path, "--target", "model") == 0
    assert {p: (tmp_path / p).read_bytes() for p in tree(tmp_path)} == before
    out = capsys.readouterr().out.splitlines()
    assert [ln for ln in out if ln.startswith("  skipped")] == [
        f"  skipped {p} (already there; --force overwrites it)"
        for p in [
            "evals/suite.yaml",
            "evals/dataset.jsonl",
            "evals/custom_evaluators.py",
            ".github/workflows/evals.yml",
        ]
    ]
    assert "  wrote   " not in "\n".join(out)
    assert (
        "  .gitignore: already ignores .ci-evals-cache/, ci-evals-results/, ci-evals-results-rerun/"
        in out
    )


def test_force_overwrites_but_never_through_a_symlink(tmp_path, capsys):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals/suite.yaml").write_text("name: mine\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (tmp_path / "evals/dataset.jsonl").symlink_to(outside)
    assert init(tmp_path, "--force") == 0
    assert (
        (tmp_path / "evals/suite.yaml")
        .read_text()
        .startswith("# A ci-evals suite, written by `ci-evals init`")
    )
    assert outside.read_text() == "keep"
    assert (
        "  skipped evals/dataset.jsonl (a symbolic link: never written through)\n"
        in capsys.readouterr().out
    )


def test_a_bad_action_reference_is_one_line_and_exit_2(tmp_path, capsys):
    assert init(tmp_path, "--action", "not a ref") == 2
    err = capsys.readouterr().err
    assert err == "error: --action: expected ACCOUNT/REPO@REF or docker://IMAGE, got 'not a ref'\n"
    assert tree(tmp_path) == []


def test_action_reference_is_written_into_the_workflow(tmp_path, capsys):
    assert init(tmp_path, "--action", "acme/ci-evals@v1.2.0") == 0
    assert (
        "        uses: acme/ci-evals@v1.2.0\n"
        in (tmp_path / ".github/workflows/evals.yml").read_text()
    )
    assert "replace OWNER" not in capsys.readouterr().out


def test_model_target_runs_against_an_openai_compatible_endpoint(tmp_path, monkeypatch):
    """``--target model``: the same suite runs as soon as a key and endpoint are there."""
    monkeypatch.chdir(tmp_path)
    assert init(tmp_path, "--target", "model") == 0
    questions = [
        json.loads(x)["input"] for x in (tmp_path / "evals/dataset.jsonl").read_text().splitlines()
    ]
    answers = dict(zip(questions, ["Paris.", "Tokyo.", "4", "42", "Blue."], strict=True))
    with FakeOpenAI(answers=answers) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-0000")
        assert main(["run", "evals/suite.yaml", "-q", "--no-cache"]) == 0
    summary = json.loads((tmp_path / "ci-evals-results/summary.json").read_text())
    assert (summary["verdict"], summary["metrics"]["answer"]["graded"]) == ("passed", 5)


def test_init_on_a_terminal_asks_for_the_target(tmp_path, monkeypatch, capsys):
    """On a TTY with no --target, one question; an unknown answer is asked again."""
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    answers = iter(["lambda", "model"])
    monkeypatch.setattr("builtins.input", lambda prompt: (print(prompt), next(answers))[1])
    assert init(tmp_path) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        "Target (command/model/letta/http) [command]: ",
        "  one of: command, model, letta, http",
        "Target (command/model/letta/http) [command]: ",
        f"ci-evals init in {tmp_path} (target: model)",
    ]


def test_init_in_a_git_repository_leaves_only_files_git_should_track(tmp_path, monkeypatch):
    """After init and a run, `git status` lists the starter files and nothing from the run."""
    assert shutil.which("git"), "git is missing: bash scripts/install-test-tools.sh installs it"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        sys, "dont_write_bytecode", False
    )  # as a plain `ci-evals run` is: bytecode on
    subprocess.run(["git", "init", "-q"], check=True)
    assert main(["init"]) == 0 and main(["run", "evals/suite.yaml", "-q"]) == 0
    status = subprocess.run(
        ["git", "status", "--porcelain", "-uall"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    assert sorted(line[3:] for line in status.stdout.splitlines()) == COMMAND_FILES
