"""Fast start: ``--version`` and ``validate`` import no heavy library."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "openai",
    "letta_client",
    "nltk",
    "rouge_score",
    "rapidfuzz",
    "httpx",
    "pydantic",
    "rich",
    "jinja2",
)


def imported_by(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint(sorted(m for m in sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()[-1]
    mods = eval(out)
    return [h for h in HEAVY if h in mods]


def test_version_imports_nothing_heavy():
    code = (
        "import contextlib, io\nfrom ci_evals.cli.app import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n    main(['--version'])"
    )
    assert imported_by(code) == []


def test_validate_of_a_tool_suite_imports_no_llm_or_metric_library():
    code = (
        "import contextlib, io\nfrom ci_evals.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['validate', 'examples/quickstart/suite.yaml']) == 0"
    )
    assert imported_by(code) == ["pydantic"]


def test_version_prints_the_version():
    out = subprocess.run(
        [sys.executable, "-m", "ci_evals", "--version"], capture_output=True, text=True
    )
    assert (out.returncode, out.stdout.strip()) == (0, "ci-evals 0.1.0")


def test_run_of_a_replay_suite_imports_no_http_or_llm_client(tmp_path):
    """A suite that calls no endpoint loads no HTTP client, LLM SDK or Letta client (issue 41 item 7)."""
    import json

    (tmp_path / "data.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "input": f"q{i}", "ground_truth": "a"}) + "\n" for i in range(3)
        )
    )
    (tmp_path / "outputs.jsonl").write_text(
        "".join(json.dumps({"id": i, "output": "a"}) + "\n" for i in range(3))
    )
    (tmp_path / "suite.yaml").write_text(
        json.dumps(
            {
                "name": "replay",
                "dataset": "data.jsonl",
                "target": {"kind": "replay", "outputs": "outputs.jsonl"},
                "graders": {"exact": {"kind": "tool", "function": "exact_match"}},
                "gate": {"metric_key": "exact", "op": "gte", "value": 1.0},
            }
        )
    )
    code = (
        "import contextlib, io\nfrom ci_evals.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['run', {str(tmp_path / 'suite.yaml')!r}, '--output', {str(tmp_path / 'out')!r}, '-q']) == 0"
    )
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()[-1]
    mods = eval(out)
    assert (tmp_path / "out" / "report.html").is_file()
    assert [
        m
        for m in ("aiohttp", "openai", "letta_client", "anthropic", "google.genai", "httpx")
        if m in mods
    ] == []
