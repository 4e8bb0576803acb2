"""The package ships py.typed (issue 39): a user's grader file is type-checked against the real
signatures of the public names, not against ``Any`` (they load lazily at run time)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

USER_CODE = """\
from ci_evals import GradeResult, Sample, grader


@grader
def good(sample: Sample, submission: str) -> GradeResult:
    return GradeResult(score=1.0, rationale=submission)


@grader
def bad(sample: Sample, submission: str) -> str:
    return submission


reveal_type(GradeResult)
"""


def test_a_users_grader_is_checked_against_the_public_signatures(tmp_path):
    (tmp_path / "graders.py").write_text(USER_CODE, encoding="utf-8")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--config-file",
            "/dev/null",
            "graders.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "MYPYPATH": str(ROOT / "src")},
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("graders.py:")]
    assert lines == [
        'graders.py:9: error: Value of type variable "_GraderF" of "grader" cannot be '
        '"Callable[[Sample, str], str]"  [type-var]',
        'graders.py:14: note: Revealed type is "def (*, score: float, rationale: str | None =, '
        'metadata: dict[str, Any] =, error: str | None =) -> ci_evals.core.sample.GradeResult"',
    ], out.stdout
