"""CI proves the README's two set-up commands on a fresh Debian root (issue 25): the commands that
scripts/fresh-debian.sh runs are the README's Quick start lines, and what they install covers
every system package the tests need."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_script_runs_the_readmes_quick_start_lines_as_written():
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "fresh-debian.sh"), "--print-commands"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    quickstart, tests = done.stdout.splitlines()
    blocks = re.findall(r"```sh\n(.*?)```", README.split("## Quick start", 1)[1], flags=re.S)
    assert quickstart in blocks[0].splitlines()
    assert tests in blocks[1].splitlines()
    assert quickstart.endswith("ci-evals run examples/quickstart/suite.yaml")
    assert tests.endswith('python -m pip install ".[test]" && python -m pytest')


def test_the_test_command_installs_libatomic1_and_curl():
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "fresh-debian.sh"), "--print-commands"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    scripts = re.findall(r"bash (scripts/install-[a-z-]+\.sh)", done.stdout.splitlines()[1])
    assert scripts == [
        "scripts/install-wordnet.sh",
        "scripts/install-chromium.sh",
        "scripts/install-test-tools.sh",
    ]
    text = "".join((ROOT / s).read_text(encoding="utf-8") for s in scripts)
    assert "pkgs=(libatomic1 fonts-dejavu-core)" in text and 'apt-install.sh" curl' in text


def test_a_wrong_argument_is_refused():
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "fresh-debian.sh"), "--nope"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert (
        done.stderr == "fresh-debian: FAILED: usage: scripts/fresh-debian.sh [--print-commands]\n"
    )
