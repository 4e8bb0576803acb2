"""Issue 37 G7 and a low: ``ci-evals init`` checks every target before it writes any
(ci_evals.cli.scaffold). A bad target is one line naming it, exit 2, and nothing written; a FIFO is
never opened; nothing is written through a symbolic link out of the folder. ``--target letta``
writes a suite that validates without a warning."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ci_evals.cli.app import main


def _tree(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix() + ("/" if p.is_dir() and not p.is_symlink() else "")
        for p in root.rglob("*")
    )


def _init(root: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """In a fresh process, with a time limit: a FIFO opened would hang it."""
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", "init", str(root), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("plant", "named", "why"),
    [
        (
            lambda r: (r / ".gitignore").mkdir(),
            ".gitignore",
            "is not a regular file (a folder); init writes a file there: nothing written",
        ),
        (
            lambda r: os.mkfifo(r / ".gitignore"),
            ".gitignore",
            "is not a regular file (a FIFO); init writes a file there: nothing written",
        ),
        (
            lambda r: (r / "evals").write_text("x"),
            "evals",
            "is not a folder (a file), and init writes evals/suite.yaml in it; nothing written",
        ),
        (
            lambda r: (r / ".github").mkdir() or (r / ".github/workflows").write_text("x"),
            ".github/workflows",
            "is not a folder (a file), and init writes .github/workflows/evals.yml in it; nothing written",
        ),
        (
            lambda r: (r / "evals").mkdir() or os.mkfifo(r / "evals/dataset.jsonl"),
            "evals/dataset.jsonl",
            "is not a regular file (a FIFO); init writes a file there: nothing written",
        ),
        (
            lambda r: (r / "evals").mkdir() or (r / "evals/suite.yaml").mkdir(),
            "evals/suite.yaml",
            "is not a regular file (a folder); init writes a file there: nothing written",
        ),
    ],
)
def test_a_bad_target_is_one_line_exit_2_and_nothing_is_written(tmp_path, plant, named, why):
    plant(tmp_path)
    before = _tree(tmp_path)
    proc = _init(tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2,
        "",
        f"error: {tmp_path / named}: {why}\n",
    )
    assert _tree(tmp_path) == before


def test_nothing_is_written_through_a_symlinked_folder_out_of_the_repository(tmp_path):
    repo, outside = tmp_path / "repo", tmp_path / "elsewhere"
    repo.mkdir()
    outside.mkdir()
    (repo / "evals").symlink_to(outside)
    proc = _init(repo)
    assert (proc.returncode, proc.stderr) == (
        2,
        f"error: {repo / 'evals'}: is a symbolic link out of {repo} (to "
        f"{outside}): init never writes through it; nothing written\n",
    )
    assert _tree(outside) == [] and _tree(repo) == ["evals"]


def test_a_symlinked_folder_inside_the_repository_is_written_through(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "evals").symlink_to("suites")
    assert main(["init", str(tmp_path)]) == 0
    assert (tmp_path / "suites/suite.yaml").is_file() and (
        tmp_path / ".github/workflows/evals.yml"
    ).is_file()


@pytest.mark.skipif(
    not shutil.which("setpriv") or os.geteuid() != 0, reason="needs root to act as another user"
)
def test_a_folder_that_cannot_be_written_is_one_line_exit_2():
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    if (
        subprocess.run(
            [*as_nobody, "-c", "import ci_evals"], capture_output=True, timeout=60
        ).returncode
        != 0
    ):
        pytest.skip(
            "another user cannot run this interpreter here (a venv under a private home, as in CI's root)"
        )
    root = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        root.chmod(0o755)  # root's: another user may look, not write
        proc = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                sys.executable,
                "-m",
                "ci_evals",
                "init",
                str(root),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (proc.returncode, proc.stderr) == (
            2,
            f"error: {root}: cannot be written (permission denied); nothing written\n",
        )
        assert _tree(root) == []
        (root / "evals").mkdir(mode=0o777)
        (root / "evals").chmod(
            0o777
        )  # evals/ writable, .github/ and .gitignore not: still nothing written
        proc = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                sys.executable,
                "-m",
                "ci_evals",
                "init",
                str(root),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2 and _tree(root) == ["evals/"]
    finally:
        shutil.rmtree(root)


def test_the_letta_suite_validates_without_a_warning(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["init", "--target", "letta"]) == 0
    capsys.readouterr()
    assert main(["validate", "evals/suite.yaml"]) == 0
    out = capsys.readouterr()
    assert out.err == "" and "gates: answer accuracy gte 0.8" in out.out
