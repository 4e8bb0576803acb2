"""Fast start: ``--version`` and ``validate`` import no heavy library."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("openai", "letta_client", "nltk", "rouge_score", "rapidfuzz", "httpx", "pydantic", "rich", "jinja2")


def imported_by(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(sorted(m for m in sys.modules))"],
                         capture_output=True, text=True, check=True).stdout.splitlines()[-1]
    mods = eval(out)
    return [h for h in HEAVY if h in mods]


def test_version_imports_nothing_heavy():
    code = "import contextlib, io\nfrom ci_evals.cli.app import main\n" \
           "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n    main(['--version'])"
    assert imported_by(code) == []


def test_validate_of_a_tool_suite_imports_no_llm_or_metric_library():
    code = ("import contextlib, io\nfrom ci_evals.cli.app import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['validate', 'examples/quickstart/suite.yaml']) == 0")
    assert imported_by(code) == ["pydantic"]


def test_version_prints_the_version():
    out = subprocess.run([sys.executable, "-m", "ci_evals", "--version"], capture_output=True, text=True)
    assert (out.returncode, out.stdout.strip()) == (0, "ci-evals 0.1.0")
