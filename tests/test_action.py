"""Action mode: inputs, step summary, outputs, annotations, masks, the PR comment and exit codes.

The end-to-end tests run replay suites through the real CLI and post to the fake GitHub server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ci_evals.action import main as action
from ci_evals.action.inputs import InputError, get_input, parse_inputs
from ci_evals.action.protocol import command, secrets_to_mask, set_outputs
from ci_evals.action.report import should_comment
from ci_evals.cli.app import main as cli_main
from ci_evals.reports.comment import marker
from tests.conftest import RUN_FILES
from tests.fakes.github_server import github_server_fixture  # noqa: F401 (fixture)

DATASET = [
    {"id": "a", "input": "capital of France?", "ground_truth": "Paris"},
    {"id": "b", "input": "capital of Japan?", "ground_truth": "Tokyo"},
    {"id": "c", "input": "2 + 2?", "ground_truth": "4"},
    {"id": "d", "input": "sky colour?", "ground_truth": "blue"},
]
GOOD = {"a": "Paris.", "b": "Tokyo!", "c": "4", "d": "Blue."}
BAD = {"a": "Lyon <script>alert(1)</script> @octocat", "b": "Tokyo", "c": "5"}  # d: no output


def write_suite(
    folder: Path, name: str, outputs: dict[str, str], value: float = 0.75, max_errors: int = 1
) -> Path:
    """A replay suite whose gate is ``answer accuracy gte value`` (tolerating ``max_errors``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in DATASET))
    (folder / "outputs.jsonl").write_text(
        "".join(json.dumps({"id": k, "output": v}) + "\n" for k, v in outputs.items())
    )
    suite = folder / "suite.yaml"
    suite.write_text(
        f"name: {name}\n"
        "dataset: dataset.jsonl\n"
        "target: {kind: replay, outputs: outputs.jsonl}\n"
        "graders:\n  answer: {kind: tool, function: contains}\n"
        f"gate: {{metric_key: answer, metric: accuracy, op: gte, value: {value}, max_errors: {max_errors}}}\n"
    )
    return suite


def read_outputs(path: Path) -> dict[str, str]:
    """Parse a $GITHUB_OUTPUT file written with heredoc delimiters."""
    out, lines, i = {}, path.read_text().splitlines(), 0
    while i < len(lines):
        name, delim = lines[i].split("<<", 1)
        end = lines.index(delim, i + 1)
        out[name] = "\n".join(lines[i + 1 : end])
        i = end + 1
    return out


@pytest.fixture
def gh_env(tmp_path, github_server, monkeypatch):
    """A pull_request event environment pointing at the fake GitHub; returns (env, fake)."""
    monkeypatch.chdir(tmp_path)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}))
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_API_URL": github_server.url,
        "GITHUB_REPOSITORY": github_server.repo,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "99",
        "GITHUB_JOB": "evals",
        "INPUT_GITHUB-TOKEN": github_server.token,
        "INPUT_OUTPUT-DIR": str(tmp_path / "out"),
    }
    return env, github_server


# ---------------------------------------------------------------- workflow commands and inputs


def test_command_escapes_data_and_properties(capsys):
    command("error", "50% done\nnext", title="a: b, c")
    assert capsys.readouterr().out == "::error title=a%3A b%2C c::50%25 done%0Anext\n"


def test_set_outputs_uses_heredoc_delimiters(tmp_path):
    path = tmp_path / "out.txt"
    set_outputs(str(path), {"metrics": '{"a": 1}', "summary-json": "x\ny"})
    text = path.read_text()
    assert re.fullmatch(
        r"metrics<<(ghadelimiter_[0-9a-f]{32})\n\{\"a\": 1\}\n\1\nsummary-json<<(ghadelimiter_[0-9a-f]{32})\nx\ny\n\2\n",
        text,
    )
    assert read_outputs(path) == {"metrics": '{"a": 1}', "summary-json": "x\ny"}


def test_secrets_to_mask_picks_tokens_and_api_keys():
    env = {
        "INPUT_GITHUB-TOKEN": "ghs_abcdef",
        "OPENAI_API_KEY": "sk-123456",
        "LETTA_TOKEN": "multi\nline-secret",
        "MY_SECRET": "hunter22",
        "PATH": "/usr/bin",
        "SHORT_TOKEN": "abc",
        "EMPTY_API_KEY": "",
    }
    assert secrets_to_mask(env) == ["ghs_abcdef", "hunter22", "line-secret", "multi", "sk-123456"]


def test_inputs_with_hyphens_and_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text("x")
    inputs = parse_inputs(
        {
            "INPUT_SUITE": "s.yaml",
            "INPUT_MAX-CONCURRENT": "3",
            "INPUT_ARGS": "--max-samples 2 --sample-tags 'a b'",
        }
    )
    assert inputs.suites == ["s.yaml"]
    assert inputs.max_concurrent == 3
    assert inputs.args == ["--max-samples", "2", "--sample-tags", "a b"]
    assert (inputs.comment, inputs.fail_on_gate, inputs.output_dir) == (
        "auto",
        True,
        Path("ci-evals-results"),
    )


def test_underscore_fallback_for_local_shells():
    assert get_input({"INPUT_FAIL_ON_GATE": "false"}, "fail-on-gate") == "false"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "input 'suite' is required: a suite YAML path or a glob such as evals/**/suite.yaml"),
        ({"INPUT_SUITE": "nope/*.yaml"}, "input 'suite': the glob 'nope/*.yaml' matches no file"),
        (
            {"INPUT_SUITE": "s.yaml", "INPUT_COMMENT": "sometimes"},
            "input 'comment' must be auto, always or never, got 'sometimes'",
        ),
        (
            {"INPUT_SUITE": "s.yaml", "INPUT_FAIL-ON-GATE": "maybe"},
            "input 'fail-on-gate' must be true or false, got 'maybe'",
        ),
        (
            {"INPUT_SUITE": "s.yaml", "INPUT_MAX-CONCURRENT": "0"},
            "input 'max-concurrent' must be a positive integer, got '0'",
        ),
        (
            {"INPUT_SUITE": "s.yaml", "INPUT_ARGS": "--x 'open"},
            "input 'args' cannot be split like a shell line: No closing quotation",
        ),
    ],
)
def test_bad_inputs_name_the_input(env, message):
    with pytest.raises(InputError) as exc:
        parse_inputs(env)
    assert str(exc.value) == message


def test_input_error_exits_2_with_summary_and_outputs(tmp_path, capsys):
    env = {
        "INPUT_COMMENT": "sometimes",
        "INPUT_SUITE": "x.yaml",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md"),
        "GITHUB_OUTPUT": str(tmp_path / "o.txt"),
    }
    assert action.run_action(env) == 2
    out = capsys.readouterr().out
    assert (
        "::error title=ci-evals configuration error::input 'comment' must be auto, always or never, got 'sometimes'"
        in out
    )
    assert (tmp_path / "s.md").read_text().startswith("## ❌ ci-evals · action input error\n")
    assert read_outputs(tmp_path / "o.txt") == {
        "passed": "false",
        "verdict": "errored",
        "exit-code": "2",
    }


def test_should_comment_modes():
    pr = {"GITHUB_EVENT_NAME": "pull_request"}
    push = {"GITHUB_EVENT_NAME": "push"}
    run = {"GITHUB_EVENT_NAME": "workflow_run"}
    assert should_comment("auto", pr) is True
    assert should_comment("auto", push) is False
    assert should_comment("auto", run, explicit_pr=True) is True
    assert should_comment("always", push) is True
    assert should_comment("never", pr, explicit_pr=True) is False


# ---------------------------------------------------------------- end to end through the CLI


def test_passing_suite_posts_one_comment_then_updates_it(tmp_path, gh_env, capsys):
    env, gh = gh_env
    env["INPUT_SUITE"] = str(write_suite(tmp_path / "good", "good", GOOD))
    assert action.run_action(env) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"::add-mask::{gh.token}\n")
    assert "::group::ci-evals run " in out and "::endgroup::" in out
    token = re.search(r"^::stop-commands::([0-9a-f]{32})$", out, re.M).group(1)
    assert f"\n::{token}::\n::endgroup::\n" in out
    assert "::error" not in out and "::warning" not in out
    outputs = read_outputs(tmp_path / "output.txt")
    comment = gh.comments[7][0]
    assert outputs == {
        "passed": "true",
        "verdict": "passed",
        "exit-code": "0",
        "summary-json": str(tmp_path / "out" / "summary.json"),
        "metrics": '{"answer": {"errors": 0, "graded": 4, "mean": 1.0, "n": 4, "pass_rate": 1.0}}',
        "comment-url": comment["html_url"],
    }
    assert comment["body"].startswith(
        marker("good:evals")
        + "\n### ✅ ci-evals · good: passed\n\n**Verdict: passed**: 1 of 1 gates passed\n"
    )
    assert "[View the run](https://github.com/actions/runs/99)" not in comment["body"]
    assert "[View the run](https://github.com/octo/widgets/actions/runs/99)" in comment["body"]
    summary_md = (tmp_path / "step_summary.md").read_text()
    assert summary_md.startswith("## ✅ ci-evals · good: passed\n")

    # Second push: the same comment is updated, not duplicated.
    assert action.run_action(env) == 0
    assert len(gh.comments[7]) == 1
    assert [r.method for r in gh.writes()] == ["POST", "PATCH"]


def test_failing_gate_exits_1_with_annotations_and_escaped_comment(tmp_path, gh_env, capsys):
    env, gh = gh_env
    suite = write_suite(tmp_path / "bad", "bad", BAD)
    env["INPUT_SUITE"] = str(suite)
    assert action.run_action(env) == 1
    out = capsys.readouterr().out
    assert (
        f"::error title=ci-evals gate failed,file={suite}::bad: answer accuracy gte 0.75: accuracy 0.2500, needs >= "
        "0.75; 1 of 4 samples errored (within max_errors 1) (failed)" in out
    )
    assert (
        "::warning title=ci-evals errored samples::bad: 1 errored sample (no score, counted as failed): target 1"
        in out
    )
    body = gh.comments[7][0]["body"]
    assert "<script>" not in body.split("```text")[0]
    assert "```text\nLyon <script>alert(1)</script> @octocat\n```" in body
    assert "### ❌ ci-evals · bad: failed" in body
    outputs = read_outputs(tmp_path / "output.txt")
    assert (outputs["passed"], outputs["verdict"], outputs["exit-code"]) == ("false", "failed", "1")
    assert json.loads(outputs["metrics"]) == {
        "answer": {"errors": 1, "graded": 3, "mean": 1 / 3, "n": 4, "pass_rate": 0.25}
    }
    md = (tmp_path / "step_summary.md").read_text()
    assert (
        "| answer accuracy gte 0.75 | 0.250 | 0.046–0.699 | 3/4 | 1 | ❌ failed (holds in 95 % of reruns) | "
        "accuracy 0.2500, needs &gt;= 0.75; "
        "1 of 4 samples errored (within max_errors 1) |"
    ) in md
    assert "**Errors:** 1 errored sample (no score, counted as failed): target 1" in md


def test_fail_on_gate_false_exits_0_but_reports_the_gate(tmp_path, gh_env, capsys):
    env, _ = gh_env
    env["INPUT_SUITE"] = str(write_suite(tmp_path / "bad", "bad", BAD))
    env["INPUT_FAIL-ON-GATE"] = "false"
    assert action.run_action(env) == 0
    assert "fail-on-gate is false: exiting 0" in capsys.readouterr().out
    outputs = read_outputs(tmp_path / "output.txt")
    assert (outputs["passed"], outputs["exit-code"]) == ("false", "1")


def test_fail_on_gate_false_still_fails_an_errored_run(tmp_path, gh_env, capsys):
    env, _ = gh_env
    env["INPUT_SUITE"] = str(write_suite(tmp_path / "bad", "bad", BAD, max_errors=0))
    env["INPUT_FAIL-ON-GATE"] = "false"
    assert action.run_action(env) == 1
    assert "fail-on-gate is false" not in capsys.readouterr().out
    outputs = read_outputs(tmp_path / "output.txt")
    assert (outputs["passed"], outputs["verdict"], outputs["exit-code"]) == (
        "false",
        "errored",
        "1",
    )


def test_403_on_a_fork_pr_keeps_the_gate_exit_code(tmp_path, gh_env, capsys):
    env, gh = gh_env
    gh.forbidden = True
    env["INPUT_SUITE"] = str(write_suite(tmp_path / "bad", "bad", BAD))
    assert action.run_action(env) == 1
    out = capsys.readouterr().out
    assert "::warning title=ci-evals PR comment::could not post the PR comment: POST " in out
    assert read_outputs(tmp_path / "output.txt")["comment-url"] == ""


def test_no_comment_on_push_events_in_auto_mode(tmp_path, gh_env):
    env, gh = gh_env
    env["GITHUB_EVENT_NAME"] = "push"
    env["INPUT_SUITE"] = str(write_suite(tmp_path / "good", "good", GOOD))
    assert action.run_action(env) == 0
    assert gh.log == []


def test_dry_run_in_args_posts_nothing(tmp_path, gh_env, capsys):
    env, gh = gh_env
    env["INPUT_SUITE"] = str(write_suite(tmp_path / "good", "good", GOOD))
    env["INPUT_ARGS"] = "--dry-run"
    assert action.run_action(env) == 0
    assert gh.log == []
    out = capsys.readouterr().out
    assert "--- PR comment (dry run: not posted) ---" in out
    assert "ci-evals: dry run, no PR comment posted" in out


def test_configuration_error_exits_2_and_still_writes_the_summary(tmp_path, gh_env, capsys):
    env, gh = gh_env
    suite = write_suite(tmp_path / "broken", "broken", GOOD)
    suite.write_text(suite.read_text().replace("dataset: dataset.jsonl", "datset: dataset.jsonl"))
    env["INPUT_SUITE"] = str(suite)
    assert action.run_action(env) == 2
    out = capsys.readouterr().out
    assert "::error title=ci-evals configuration error::error: " in out
    md = (tmp_path / "step_summary.md").read_text()
    assert md.startswith(f"## ❌ ci-evals · {suite}: configuration error\n\n```text\nerror: ")
    assert "datset" in md
    assert read_outputs(tmp_path / "output.txt")["passed"] == "false"
    assert gh.log == []


def test_glob_runs_each_suite_into_its_own_folder(tmp_path, gh_env, capsys):
    env, gh = gh_env
    write_suite(tmp_path / "evals" / "one", "one", GOOD)
    write_suite(tmp_path / "evals" / "two", "two", BAD)
    env["INPUT_SUITE"] = "evals/*/suite.yaml"
    assert action.run_action(env) == 1
    outputs = read_outputs(tmp_path / "output.txt")
    out_dir = tmp_path / "out"
    assert outputs["summary-json"].splitlines() == [
        str(out_dir / "evals-one-suite" / "summary.json"),
        str(out_dir / "evals-two-suite" / "summary.json"),
    ]
    assert sorted(json.loads(outputs["metrics"])) == ["one/answer", "two/answer"]
    assert sorted(c["body"].splitlines()[0] for c in gh.comments[7]) == [
        marker("one:evals"),
        marker("two:evals"),
    ]
    md = (tmp_path / "step_summary.md").read_text()
    assert "## ✅ ci-evals · one: passed" in md and "## ❌ ci-evals · two: failed" in md
    assert read_outputs(tmp_path / "output.txt")["verdict"] == "failed"


def test_token_is_not_printed_or_written(tmp_path, gh_env, capsys):
    env, gh = gh_env
    env["INPUT_SUITE"] = str(write_suite(tmp_path / "bad", "bad", BAD))
    action.run_action(env)
    captured = capsys.readouterr()
    assert captured.out.count(gh.token) == 1  # only in the ::add-mask:: line
    assert gh.token not in captured.err
    for path in [
        *(tmp_path / "out").iterdir(),
        tmp_path / "step_summary.md",
        tmp_path / "output.txt",
    ]:
        assert gh.token not in path.read_text()


def test_main_with_a_subcommand_is_the_plain_cli(tmp_path, capsys):
    suite = write_suite(tmp_path / "good", "good", GOOD)
    rc = cli_main(["action", "run", str(suite), "--output", str(tmp_path / "o"), "--dry-run", "-q"])
    assert rc == 0
    assert marker("good") in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == RUN_FILES


def test_cli_action_entry_reaches_the_action(tmp_path, monkeypatch, capsys):
    from ci_evals.cli.app import main as cli_main

    monkeypatch.chdir(tmp_path)
    for key in [k for k in list(__import__("os").environ) if k.startswith(("INPUT_", "GITHUB_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("INPUT_COMMENT", "bogus")
    assert cli_main(["action"]) == 2
    assert "input 'comment' must be auto, always or never" in capsys.readouterr().out


def test_baseline_input_compares_and_a_missing_one_is_a_warning(tmp_path, gh_env, capsys):
    env, gh = gh_env
    env["INPUT_SUITE"] = str(write_suite(tmp_path / "good", "good", GOOD))
    env["INPUT_BASELINE"] = str(tmp_path / "no-such-folder")
    assert action.run_action(env) == 0
    out = capsys.readouterr().out
    assert (
        f"::warning title=ci-evals baseline::no summary.json in baseline '{tmp_path / 'no-such-folder'}'"
        in out
    )
    (tmp_path / "out").rename(tmp_path / "main-results")
    env["INPUT_SUITE"] = str(write_suite(tmp_path / "bad", "good", BAD))
    env["INPUT_BASELINE"] = str(tmp_path / "main-results")
    assert action.run_action(env) == 1
    body = gh.comments[7][0]["body"]
    assert (
        "| answer | 0.333 (0.000–1.000) | 25.0% (1/4) | 3/4 | 1 | `score >= 1` | ▼ −0.667 |" in body
    )
    assert "regressions: 3 · improvements: 0 · new: 0 · removed: 0" in body


def test_results_input_reports_on_finished_folders(tmp_path, gh_env, capsys):
    """A workflow_run job on a fork's PR: no suite run, the PR number given explicitly."""
    env, gh = gh_env
    suite = write_suite(tmp_path / "bad", "bad", BAD)
    assert (
        cli_main(["action", "run", str(suite), "--output", str(tmp_path / "artifact"), "-q"]) == 1
    )
    capsys.readouterr()
    env.update(
        {
            "GITHUB_EVENT_NAME": "workflow_run",
            "INPUT_RESULTS": str(tmp_path / "artifact"),
            "INPUT_PR-NUMBER": "12",
        }
    )
    event = tmp_path / "workflow_run.json"
    event.write_text(json.dumps({"workflow_run": {"head_sha": "abc123" * 6, "pull_requests": []}}))
    env["GITHUB_EVENT_PATH"] = str(event)
    gh.pulls[12] = (
        "abc123" * 6
    )  # the PR number from the artifact is checked against the run's commit
    assert action.run_action(env) == 1
    out = capsys.readouterr().out
    assert "::group::" not in out  # nothing was run
    assert "::error title=ci-evals gate failed" in out
    assert gh.comments[12][0][
        "body"
    ].startswith(  # keyed by the folder the workflow named, not the artifact
        marker(f"artifact:evals:results={tmp_path / 'artifact'}")
        + "\n### ❌ ci-evals · bad: failed"
    )
    outputs = read_outputs(tmp_path / "output.txt")
    assert (outputs["exit-code"], outputs["summary-json"]) == (
        "1",
        str(tmp_path / "artifact" / "summary.json"),
    )


def test_results_mode_refuses_a_pr_number_whose_head_is_not_the_runs_commit(
    tmp_path, gh_env, capsys
):
    env, gh = gh_env
    suite = write_suite(tmp_path / "bad", "bad", BAD)
    assert (
        cli_main(["action", "run", str(suite), "--output", str(tmp_path / "artifact"), "-q"]) == 1
    )
    event = tmp_path / "workflow_run.json"
    event.write_text(json.dumps({"workflow_run": {"head_sha": "a" * 40, "pull_requests": []}}))
    gh.pulls[12] = "b" * 40  # the artifact names someone else's pull request
    capsys.readouterr()
    env.update(
        {
            "GITHUB_EVENT_NAME": "workflow_run",
            "GITHUB_EVENT_PATH": str(event),
            "INPUT_RESULTS": str(tmp_path / "artifact"),
            "INPUT_PR-NUMBER": "12",
        }
    )
    assert action.run_action(env) == 1
    out = capsys.readouterr().out
    assert (
        "::warning title=ci-evals PR comment::pull request #12 has head bbbbbbbbbbbb, not this run's "
        "commit aaaaaaaaaaaa: the PR comment was not posted"
    ) in out
    assert gh.writes() == []


def test_results_input_without_a_summary_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="input 'results': no summary.json in 'nowhere'"):
        parse_inputs({"INPUT_RESULTS": "nowhere"})
    with pytest.raises(
        InputError, match="input 'pr-number' must be a pull request number, got '#3'"
    ):
        parse_inputs({"INPUT_SUITE": "x.yaml", "INPUT_PR-NUMBER": "#3"})
