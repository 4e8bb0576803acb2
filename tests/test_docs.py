"""The README's set-up commands, install lines and container page say what works (issue 17, 1-3).

The commands themselves were run in a fresh Debian bookworm (see the issue's note); these tests
keep the text from drifting back: every install line is one that works, one placeholder is used
and explained once, and the container page only documents build arguments and flags that the
Dockerfile and the smoke test really have.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONTAINERS = (ROOT / "docs" / "containers.md").read_text(encoding="utf-8")
DOCS = {
    p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
    for p in [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "docs").glob("*.yml")),
        *sorted((ROOT / "examples").rglob("README.md")),
    ]
}


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def test_quick_start_commands_create_and_use_a_venv():
    blocks = shell_blocks(README.split("## Quick start", 1)[1])
    assert blocks[0] == (
        "# Debian/Ubuntu, once: sudo apt-get install python3-venv   (python3 -m venv needs it)\n"
        "python3 -m venv .venv && . .venv/bin/activate && python -m pip install . && "
        "ci-evals run examples/quickstart/suite.yaml\n"
    )
    # System packages first, one script each from scripts/ (WordNet, and any other the tests need,
    # chained the same way), then the venv, the test extras and the tests.
    setup = re.fullmatch(
        r"((?:bash scripts/install-[a-z0-9-]+\.sh && )+)python3 -m venv \.venv && "
        r'\. \.venv/bin/activate && python -m pip install "\.\[test\]" && python -m pytest\n',
        blocks[1],
    )
    assert setup is not None, blocks[1]
    assert setup.group(1).startswith("bash scripts/install-wordnet.sh && ")


def test_every_script_a_quick_start_command_runs_exists():
    for block in shell_blocks(README.split("## Quick start", 1)[1])[:2]:
        for script in re.findall(r"bash (scripts/\S+)", block):
            assert (ROOT / script).is_file(), script


@pytest.mark.parametrize("name", sorted(DOCS))
def test_install_lines_only_install_what_exists(name):
    """No ``pip install ci-evals`` (not on PyPI): the repository, a local path, the image, or a
    third-party package that is on PyPI (Letta Code, the vendors' SDKs, redis for the Letta server)."""
    for line in DOCS[name].splitlines():
        for command in re.findall(r"pip3? install ([^`#&\n]*)", line):
            target = command.strip().split()[-1].strip("\"'")
            assert (
                target in (".", ".[test]")
                or target.startswith("git+https://github.com/OWNER/ci-evals@v1")
                or target.startswith(("letta", "anthropic", "google-genai", "redis"))
            ), f"{name}: {line.strip()}"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_one_placeholder_for_the_repository(name):
    text = DOCS[name]
    assert "ci-evals/ci-evals@" not in text and "OWNER/REPO" not in text, name
    for use in re.findall(r"uses: (\S*ci-evals\S*)", text):
        assert use in ("OWNER/ci-evals@v1", "docker://ghcr.io/OWNER/ci-evals:v1"), f"{name}: {use}"
    for image in re.findall(r"ghcr\.io/\S+", text):
        assert image.startswith("ghcr.io/OWNER/ci-evals:v1"), f"{name}: {image}"


def test_the_placeholder_is_explained_once_before_its_first_use_in_the_readme():
    explanation = "`OWNER`, here and everywhere in these docs, stands for the GitHub account that hosts ci-evals"
    assert README.count(explanation) == 1
    first_use = min(README.index(p) for p in ("OWNER/", "/OWNER"))
    assert README.index(explanation) < first_use


def test_container_page_build_args_are_the_dockerfiles():
    dockerfile_args = set(
        re.findall(r"^ARG (\w+)", (ROOT / "Dockerfile").read_text(encoding="utf-8"), flags=re.M)
    )
    documented = set(re.findall(r"--build-arg (\w+)=", CONTAINERS))
    assert documented == {"BASE_IMAGE", "PIP_CERT"} and documented <= dockerfile_args


def test_container_page_explains_every_flag_the_smoke_test_needs():
    smoke = (ROOT / "scripts" / "container-smoke.sh").read_text(encoding="utf-8")
    flags = [
        "--isolation chroot",
        "--runtime runc",
        "--ulimit nofile=1024:1024",
        "--ulimit nproc=1024:1024",
        "--pull=never",
        "--network none",
    ]
    table = CONTAINERS.split("## Hosts where containers cannot raise resource limits", 1)[1]
    for flag in flags:
        assert flag in smoke, flag
        assert f"`{flag.split()[0]}" in table, flag
    assert "--ulimit nofile=1024:1024 --ulimit nproc=1024:1024" in table


def test_readme_and_action_docs_link_the_container_page():
    assert "[docs/containers.md](docs/containers.md)" in README
    assert "docs/containers.md" in (ROOT / "src" / "ci_evals" / "action" / "help.py").read_text(
        encoding="utf-8"
    )
