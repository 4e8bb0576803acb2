"""``ci-evals action --help``: what action mode reads, what it writes, and how to run it locally.

The inputs and outputs are the ones action.yml declares, in its order and with its defaults
(tests/test_action_help.py compares them with action.yml, so the two cannot drift apart). The
image has no action.yml to read at run time, hence the table here.
"""

from __future__ import annotations

from collections.abc import Sequence

from ci_evals.config.rates import DEFAULT_MAX_CONCURRENT

INPUTS: tuple[tuple[str, str, str], ...] = (
    # (input, default as in action.yml, what it does)
    ("suite", "", "suite YAML path(s) or glob(s), one per line; required unless 'results'"),
    (
        "max-concurrent",
        "",
        f"samples in flight (default: the suite's max_concurrent, else {DEFAULT_MAX_CONCURRENT})",
    ),
    ("output-dir", "ci-evals-results", "results folder (a subfolder per suite when several)"),
    ("github-token", "${{ github.token }}", "token for the PR comment (pull-requests: write)"),
    ("comment", "auto", "auto (on pull_request events), always or never"),
    ("pr-number", "", "pull request to comment on when the event does not name one"),
    ("comment-key", "", "extra key for the comment's marker (default: the job id)"),
    ("fail-on-gate", "true", "false: a failed gate exits 0 (errors still fail the step)"),
    ("baseline", "", "an earlier results folder to compare with"),
    ("results", "", "report on finished results folders instead of running suites"),
    ("gate", "", "gates added to every suite, one per line: METRIC [AGGREGATION] OP VALUE"),
    ("args", "", "extra 'ci-evals run' flags, split like a shell line (e.g. --dry-run)"),
)

OUTPUTS: tuple[tuple[str, str], ...] = (
    ("passed", '"true" when every suite\'s verdict is passed, else "false"'),
    ("verdict", "the worst verdict: passed, failed, errored, partial or interrupted"),
    (
        "exit-code",
        "0 passed, 1 failed/errored/partial, 2 configuration error, 3 internal error, 129/130/143",
    ),
    ("summary-json", "path of each suite's summary.json, one per line"),
    ("metrics", "JSON: metric (suite/metric with several suites) -> {mean, pass_rate, n, errors}"),
    ("comment-url", "URL of each PR comment posted or updated, one per line"),
)

GITHUB_VARIABLES: tuple[tuple[str, str], ...] = (
    ("GITHUB_STEP_SUMMARY", "file the markdown report is appended to (on every outcome)"),
    ("GITHUB_OUTPUT", "file the outputs above are appended to"),
    ("GITHUB_EVENT_NAME", "comment: auto comments on pull_request events only"),
    ("GITHUB_EVENT_PATH", "event payload: the pull request number"),
    ("GITHUB_REPOSITORY", "owner/name of the repository the PR comment goes to"),
    ("GITHUB_API_URL", "the REST API (GitHub Enterprise); default https://api.github.com"),
    ("GITHUB_JOB", "the comment marker's default key"),
    ("GITHUB_SERVER_URL", "with GITHUB_RUN_ID and GITHUB_RUN_ATTEMPT: the link to the run"),
)


def _rows(pairs: Sequence[tuple[str, str]]) -> list[str]:
    width = max(len(name) for name, _ in pairs)
    return [f"  {name:<{width}}  {text}" for name, text in pairs]


def action_help() -> str:
    """The help text of action mode."""
    inputs = [
        (f"INPUT_{name.upper()}", text + (f" [default: {default}]" if default else ""))
        for name, default, text in INPUTS
    ]
    lines = [
        "usage: ci-evals action [COMMAND ...]",
        "",
        "GitHub Action mode, the entrypoint of the Action's image. Without arguments it reads the",
        "action's inputs from INPUT_* variables, runs each suite, and writes the step summary, the",
        "step outputs, annotations and one PR comment per suite. Its exit code is the gate's. With",
        "a command (run, validate, merge, ...) it is the plain CLI, as in `ci-evals COMMAND`.",
        "",
        "inputs (GitHub sets INPUT_ + the upper-cased input name, hyphens kept; when you set them",
        "yourself, underscores work too: INPUT_MAX_CONCURRENT):",
        *_rows(inputs),
        "",
        "outputs (appended to $GITHUB_OUTPUT):",
        *_rows(OUTPUTS),
        "",
        "also reads:",
        *_rows(GITHUB_VARIABLES),
        "",
        "exit codes: 0 every gate passed, 1 a gate failed, 2 invalid configuration or input,",
        "3 internal error, 129/130/143 interrupted (SIGHUP/SIGINT/SIGTERM).",
        "",
        "run it locally (runs the suite, writes the report and outputs to files, posts nothing):",
        "  INPUT_SUITE=examples/quickstart/suite.yaml INPUT_ARGS=--dry-run \\",
        "  GITHUB_STEP_SUMMARY=summary.md GITHUB_OUTPUT=outputs.txt ci-evals action",
        "the same in the image (docs/containers.md):",
        '  docker run --rm -v "$PWD:/github/workspace" -e INPUT_SUITE=evals/suite.yaml \\',
        "    -e INPUT_ARGS=--dry-run ci-evals",
    ]
    return "\n".join(lines) + "\n"
