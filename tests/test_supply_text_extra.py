"""Issue 41 item 4: text_similarity's nltk and rouge-score are the `text` extra. A suite whose
metric needs them, where they are not installed, fails at load time (validate and run alike) with
one line naming `pip install 'ci-evals[text]'` and exit 2; fuzzy_match (rapidfuzz, core) and
cosine need nothing of it. Not installed is made here by blocking the imports in a subprocess
(sys.modules[name] = None, which both `import` and importlib's find_spec honour)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BLOCKED = textwrap.dedent("""\
    import sys
    for name in sys.argv[1].split(","):
        if name:
            sys.modules[name] = None
    from ci_evals.cli.app import main
    sys.exit(main(sys.argv[2:]))
""")
SUITE = """\
name: text-extra
dataset: data.jsonl
target:
  kind: command
  command: [{python}, -c, "print('hello world')"]
graders:
  sim:
    kind: text_similarity
    reference: "{{{{ sample.ground_truth }}}}"
    evaluation_metric: {metric}
gate:
  metric_key: sim
  metric: accuracy
  op: gte
  value: 0.0
"""
LINE = (
    "error: suite.yaml:7: graders.sim: evaluation_metric '{metric}' needs {dists}, which {verb} not "
    "installed: pip install 'ci-evals[text]' (the text extra: rouge-score and nltk)\n"
)


def cli(tmp_path: Path, metric: str, blocked: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "suite.yaml").write_text(SUITE.format(python=sys.executable, metric=metric))
    (tmp_path / "data.jsonl").write_text('{"input": "hi", "ground_truth": "hello world"}\n')
    return subprocess.run(
        [sys.executable, "-c", BLOCKED, blocked, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("command", [["validate", "suite.yaml"], ["run", "suite.yaml", "-q"]])
@pytest.mark.parametrize("metric", ["bleu", "rouge_l", "meteor"])
def test_a_text_metric_without_the_extra_is_one_line_and_exit_2(tmp_path, metric, command):
    done = cli(tmp_path, metric, "nltk,rouge_score", *command)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == LINE.format(metric=metric, dists="nltk and rouge-score", verb="are")
    assert not (tmp_path / "ci-evals-results").exists()


def test_one_library_missing_is_named_alone(tmp_path):
    done = cli(tmp_path, "rouge_1", "rouge_score", "validate", "suite.yaml")
    assert done.returncode == 2
    assert done.stderr == LINE.format(metric="rouge_1", dists="rouge-score", verb="is")


def test_fuzzy_match_needs_nothing_of_the_extra(tmp_path):
    done = cli(tmp_path, "fuzzy_match", "nltk,rouge_score", "validate", "suite.yaml")
    assert done.returncode == 0, done.stderr
    assert "valid" in done.stdout


def test_with_the_extra_installed_the_suite_validates(tmp_path):
    done = cli(tmp_path, "bleu", "", "validate", "suite.yaml")
    assert done.returncode == 0, done.stderr
