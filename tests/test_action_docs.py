"""The Action's tables in the docs are action.yml's, and a release's action.yml runs the published image.

Every inputs/outputs table in README.md and docs/*.md is generated from action.yml by
scripts/action_docs.py between markers; these tests fail when one differs (a hand edit, or an
input added to action.yml without rerunning the script), and pin the generator's behaviour on
bad markers. scripts/release_action.py is what the release workflow runs on action.yml.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTION_TEXT = (ROOT / "action.yml").read_text(encoding="utf-8")
ACTION = yaml.safe_load(ACTION_TEXT)


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


docs = load("action_docs")
release = load("release_action")


def tables(text: str) -> dict[str, list[str]]:
    """Marker kind -> the generated regions of that kind in ``text``."""
    found: dict[str, list[str]] = {}
    for kind, body in re.findall(
        r"<!-- (action-[a-z]+):start -->\n(.*?)<!-- \1:end -->", text, flags=re.S
    ):
        found.setdefault(kind, []).append(body)
    return found


@pytest.mark.parametrize(
    "doc, kinds",
    [
        ("README.md", ["action-inputs", "action-outputs"]),
        ("docs/github-action.md", ["action-inputs", "action-outputs"]),
        ("docs/containers.md", ["action-env", "action-outputs"]),
    ],
)
def test_each_doc_carries_the_tables_generated_from_action_yml(doc, kinds):
    text = (ROOT / doc).read_text(encoding="utf-8")
    found = tables(text)
    assert sorted(found) == kinds
    for kind in kinds:
        assert found[kind] == [docs.render(kind, ACTION) + "\n"], (
            f"{doc}: {kind} (run python scripts/action_docs.py)"
        )


def test_every_input_and_output_of_action_yml_is_in_every_table():
    inputs, outputs = list(ACTION["inputs"]), list(ACTION["outputs"])
    assert {"results", "pr-number", "gate"} <= set(inputs) and "verdict" in outputs
    rows = docs.render("action-inputs", ACTION).splitlines()[2:]
    assert [re.match(r"\| `([a-z-]+)` \|", r).group(1) for r in rows] == inputs
    rows = docs.render("action-outputs", ACTION).splitlines()[2:]
    assert [re.match(r"\| `([a-z-]+)` \|", r).group(1) for r in rows] == outputs
    rows = docs.render("action-env", ACTION).splitlines()[2:]
    assert [re.match(r"\| `INPUT_([A-Z-]+)` \|", r).group(1) for r in rows] == [
        i.upper() for i in inputs
    ]
    assert "| `INPUT_GITHUB-TOKEN` | `github-token` | `${{ github.token }}` |" in rows


def test_a_table_row_folds_whitespace_and_escapes_pipes():
    action = {
        "inputs": {"x": {"description": "a |\n  b", "required": True}, "y": {"default": "1"}},
        "outputs": {"o": {"description": "done"}},
    }
    assert docs.render("action-inputs", action) == (
        "| input | default | meaning |\n|---|---|---|\n| `x` | required | a \\| b |\n| `y` | `1` |  |"
    )
    assert (
        docs.render("action-outputs", action) == "| output | meaning |\n|---|---|\n| `o` | done |"
    )


def test_check_fails_naming_a_stale_doc_and_the_rewrite_fixes_it(tmp_path, monkeypatch, capsys):
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "action.yml", tmp_path / "action.yml")
    shutil.copy(ROOT / "docs" / "github-action.md", tmp_path / "docs" / "github-action.md")
    readme = "# x\n\n<!-- action-outputs:start -->\n| output | meaning |\n<!-- action-outputs:end -->\nafter\n"
    (tmp_path / "README.md").write_text(readme, encoding="utf-8")
    monkeypatch.setattr(docs, "ROOT", tmp_path)
    monkeypatch.setattr(
        docs, "documents", lambda: [tmp_path / "README.md", tmp_path / "docs" / "github-action.md"]
    )
    assert docs.main(["--check"]) == 1
    assert capsys.readouterr().out == (
        "action_docs: README.md: differs from action.yml (run: python scripts/action_docs.py)\n"
    )
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == readme  # --check changes nothing
    assert docs.main([]) == 0
    assert capsys.readouterr().out == "action_docs: README.md: rewritten from action.yml\n"
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == (
        "# x\n\n<!-- action-outputs:start -->\n"
        + docs.render("action-outputs", ACTION)
        + "\n<!-- action-outputs:end -->\nafter\n"
    )
    assert docs.main(["--check"]) == 0
    # An input added to action.yml makes every inputs table stale.
    (tmp_path / "action.yml").write_text(
        ACTION_TEXT.replace(
            "\noutputs:",
            '  new-input:\n    description: New.\n    required: false\n    default: ""\n\noutputs:',
        ),
        encoding="utf-8",
    )
    capsys.readouterr()
    assert docs.main(["--check"]) == 1
    assert capsys.readouterr().out == (
        "action_docs: docs/github-action.md: differs from action.yml "
        "(run: python scripts/action_docs.py)\n"
    )


@pytest.mark.parametrize(
    "text, error",
    [
        (
            "a\n<!-- action-inputs:start -->\nx\n",
            "doc.md:2: action-inputs:start without its action-inputs:end",
        ),
        (
            "<!-- action-inputs:end -->\n",
            "doc.md:1: action-inputs:end without its action-inputs:start",
        ),
        (
            "<!-- action-inputs:start -->\n<!-- action-outputs:start -->\n",
            "doc.md:2: action-outputs:start inside action-inputs (no action-inputs:end before it)",
        ),
        (
            "\n\n<!-- action-secrets:start -->\n",
            "doc.md:3: unknown table 'action-secrets' (known: action-inputs, action-outputs, action-env)",
        ),
    ],
)
def test_a_broken_marker_is_an_error_naming_file_and_line(text, error):
    with pytest.raises(docs.DocError) as e:
        docs.rewrite(text, ACTION, "doc.md")
    assert str(e.value) == error


def test_the_docs_say_how_to_pass_the_token_when_the_image_is_used_directly():
    containers = (ROOT / "docs" / "containers.md").read_text(encoding="utf-8")
    assert "- uses: docker://ghcr.io/OWNER/ci-evals:v1\n" in containers
    assert "INPUT_GITHUB-TOKEN: ${{ github.token }}" in containers
    assert ACTION["inputs"]["github-token"]["default"] == "${{ github.token }}"
    assert (
        "INPUT_GITHUB-TOKEN: ${{ github.token }}" in ACTION["inputs"]["github-token"]["description"]
    )


def test_main_builds_the_dockerfile_and_a_release_runs_the_published_image(tmp_path):
    assert ACTION["runs"] == {"using": "docker", "image": "Dockerfile"}
    image = "ghcr.io/acme/ci-evals:v1.2.3"
    out = release.released(ACTION_TEXT, image)
    assert yaml.safe_load(out)["runs"] == {"using": "docker", "image": f"docker://{image}"}
    assert out.replace(f"docker://{image}", "Dockerfile") == ACTION_TEXT  # nothing else changed
    copy = tmp_path / "action.yml"
    copy.write_text(ACTION_TEXT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release_action.py"), image, str(copy)],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"release_action: {copy}: image: docker://{image}\n",
        "",
    )
    assert copy.read_text(encoding="utf-8") == out
    check = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    assert check, "check-jsonschema comes with the test extras"
    done = subprocess.run(
        [check, "--builtin-schema", "vendor.github-actions", str(copy)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "image, text, error",
    [
        (
            "ghcr.io/Acme/ci-evals:v1.2.3",
            None,
            "image 'ghcr.io/Acme/ci-evals:v1.2.3' is not ghcr.io/owner/repo:vX.Y.Z (lower case)",
        ),
        (
            "ghcr.io/acme/ci-evals:latest",
            None,
            "image 'ghcr.io/acme/ci-evals:latest' is not ghcr.io/owner/repo:vX.Y.Z (lower case)",
        ),
        (
            "ghcr.io/acme/ci-evals:v1.2.3",
            "runs:\n  using: docker\n  image: docker://x\n",
            "action.yml has 0 'image: Dockerfile' lines under runs:, expected 1",
        ),
    ],
)
def test_a_release_refuses_a_bad_image_or_an_action_yml_it_cannot_point(
    image, text, error, tmp_path
):
    copy = tmp_path / "action.yml"
    copy.write_text(text or ACTION_TEXT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release_action.py"), image, str(copy)],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        f"release_action: {copy}: {error}\n",
    )
    assert copy.read_text(encoding="utf-8") == (text or ACTION_TEXT)
