"""Results mode (the fork-safe workflow_run flow): every string of the artifact is untrusted.

A fork's PR job produced the artifact, so it can write anything into summary.json and
results.jsonl; the comment and step summary rendered from it must carry no HTML, no links, no
pings and no unbalanced ``<details>``, whichever field the text was put in.
"""

from __future__ import annotations

import json
import re

import pytest

from ci_evals.action import main as action
from ci_evals.cli.app import main as cli_main
from ci_evals.reports.artifact import neutralise
from tests.fakes.github_server import github_server_fixture  # noqa: F401 (fixture)
from tests.test_action import BAD, gh_env, write_suite  # noqa: F401 (fixture)

EVIL = "<img src=x onerror=alert(1)> [click](https://evil.example) @octo-org/admins </details><details open> `x` | www.evil.example #12"


def tamper(value):
    """Every string of a JSON document (keys included) replaced by EVIL plus the original."""
    if isinstance(value, str):
        return EVIL + value
    if isinstance(value, dict):
        return {
            (EVIL + k if k not in ("metrics", "gates", "errors", "gate", "config") else k): tamper(
                v
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [tamper(v) for v in value]
    return value


def assert_inert(text: str) -> None:
    assert "<img" not in text
    assert "](https://evil" not in text and "https://evil" not in text and "www.evil" not in text
    assert "@octo-org" not in text
    assert text.count("<details") == text.count("</details>")


def test_neutralise_makes_markup_inert_but_readable():
    assert (
        neutralise("a <b>&amp; [x](http://y) @me `c` | d #1\nnext")
        == "a ‹b›＆amp; ［x］(http:/\u2060/y) ＠me ˋcˋ ¦ d ＃1 next"
    )
    assert neutralise("line\nbreak", multiline=True) == "line\nbreak"


def test_every_string_of_a_tampered_artifact_is_rendered_inert(tmp_path, gh_env, capsys):  # noqa: F811
    env, gh = gh_env
    suite = write_suite(tmp_path / "bad", "bad", BAD)
    assert (
        cli_main(["action", "run", str(suite), "--output", str(tmp_path / "artifact"), "-q"]) == 1
    )
    for name in ("summary.json",):
        path = tmp_path / "artifact" / name
        path.write_text(json.dumps(tamper(json.loads(path.read_text()))), encoding="utf-8")
    rows = [
        json.loads(x) for x in (tmp_path / "artifact" / "results.jsonl").read_text().splitlines()
    ]
    for row in rows:
        row["sample_id"] = EVIL + str(row["sample_id"])
        if row.get("error"):
            row["error"]["category"] = EVIL
    (tmp_path / "artifact" / "results.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows)
    )
    capsys.readouterr()
    event = tmp_path / "workflow_run.json"
    event.write_text(json.dumps({"workflow_run": {"head_sha": "c" * 40}}))
    gh.pulls[12] = "c" * 40
    env.update(
        {
            "GITHUB_EVENT_NAME": "workflow_run",
            "INPUT_RESULTS": str(tmp_path / "artifact"),
            "INPUT_PR-NUMBER": "12",
            "GITHUB_EVENT_PATH": str(event),
        }
    )
    code = action.run_action(env)
    out = capsys.readouterr().out
    assert code in (0, 1, 2), out
    body = gh.comments[12][0]["body"]
    step = (tmp_path / "step_summary.md").read_text(encoding="utf-8")
    for text in (body, step):
        assert_inert(text)
    assert re.search(r"::(error|warning)[^\n]*<img", out) is None


@pytest.mark.parametrize(
    ("summary", "code"),
    [
        ({"verdict": "passed"}, 0),
        ({"verdict": "passed; rm -rf /"}, 1),
        ({"verdict": "", "gates": "x", "n_samples": 3}, 1),  # no verdict and gates of another shape
        ({"gates": [1, 2], "n_samples": 3}, 1),
        ({"verdict": "interrupted", "interrupted_by": "SIGTERM"}, 143),
    ],
)
def test_an_artifacts_verdict_decides_its_exit_code_and_a_foreign_shape_never_passes(
    tmp_path, summary, code
):
    from ci_evals.action.report import load_results

    (tmp_path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    assert load_results(str(tmp_path)).exit_code == code
