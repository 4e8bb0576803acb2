"""Validate every example suite letta-evals ships, at each of its tags, with ``ci-evals validate``.

Usage: python scripts/letta_evals_examples.py [--stub-letta-code] GIT_DIR [TAG ...]

GIT_DIR is a clone (or bare mirror) of letta-ai/letta-evals. Each tag's ``examples/`` folder is
exported into a temporary folder (nothing is copied into this repository) and every suite YAML in
it is validated unchanged. Prints one line per suite and a count per tag; exits 1 if any suite
failed for a reason other than the known ones (letta-client 0.x imports, Letta Code targets).

``--stub-letta-code`` (a measuring aid, never a feature): when this ci-evals has no ``letta_code``
target, a placeholder that accepts any keys stands in for it, so the rest of those suites (gates,
rewards, graders, datasets, custom code) is still checked.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

TAGS = ["0.4.1", "0.5.0", "0.7.0", "0.16.0", "0.20.0", "0.25.1"]
# Known reasons a shipped example cannot validate here (see the README, "Coming from letta-evals").
KNOWN = {
    "letta-client version": "written for another letta-client version",
    "Letta Code target": "unknown target kind 'letta_code'",  # when this ci-evals has no letta_code target
    "Letta Code": "Letta Code",
}


def suites_at(git_dir: str, tag: str, dest: Path) -> list[Path]:
    ref = tag if tag.startswith("letta-evals-v") else f"letta-evals-v{tag}"
    data = subprocess.run(
        ["git", "--git-dir", git_dir, "archive", "--format=tar", ref, "examples"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    found = sorted(
        p
        for p in (dest / "examples").rglob("*.y*ml")
        if p.suffix in (".yaml", ".yml") and "dataset" not in p.name
    )
    return [p for p in found if _is_suite(p)]


def _is_suite(path: Path) -> bool:
    text = path.read_text(encoding="utf-8", errors="replace")
    return "graders:" in text and "dataset:" in text


STUB = """
import sys
from ci_evals._util.registry import TARGETS
if "letta_code" not in TARGETS:
    from pydantic import ConfigDict
    from ci_evals.config.specs import TargetSpec
    from ci_evals.targets.base import Target

    class AnyKeys(TargetSpec):
        model_config = ConfigDict(extra="allow")

    class Placeholder(Target):
        spec_model = AnyKeys

        def __init__(self, spec, ctx):
            self.spec = spec

    TARGETS.register("letta_code", Placeholder)
from ci_evals.cli.app import main
sys.exit(main(sys.argv[1:]))
"""


def main(argv: list[str]) -> int:
    stub = "--stub-letta-code" in argv
    argv = [a for a in argv if a != "--stub-letta-code"]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    git_dir, tags = argv[0], argv[1:] or TAGS
    unexpected = 0
    for tag in tags:
        with tempfile.TemporaryDirectory() as tmp:
            suites = suites_at(git_dir, tag, Path(tmp))
            ok, known, bad = 0, 0, 0
            for suite in suites:
                cmd = [sys.executable, "-c", STUB] if stub else [sys.executable, "-m", "ci_evals"]
                proc = subprocess.run(
                    [*cmd, "validate", str(suite)], capture_output=True, text=True, cwd=suite.parent
                )
                rel = suite.relative_to(Path(tmp) / "examples")
                line = (proc.stdout + proc.stderr).strip().splitlines()
                last = line[-1] if line else ""
                if proc.returncode == 0:
                    ok += 1
                    print(f"  {tag} ok    {rel}")
                    continue
                reason = next((k for k, needle in KNOWN.items() if needle in last), None)
                if reason:
                    known += 1
                else:
                    bad += 1
                print(f"  {tag} {'known' if reason else 'FAIL '} {rel}: {last}")
            unexpected += bad
            print(
                f"letta-evals {tag}: {ok} of {len(suites)} validate; {known} known exceptions; {bad} other failures"
            )
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
