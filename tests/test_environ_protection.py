"""F2 and F11: no program ci-evals starts finds the GitHub token (in any form) or a model key in
its own environment or in any ``/proc/*/environ`` it can read."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.action.handover import hidden_names, token_forms
from tests.test_secrets import GITHUB_TOKEN, _action, env_with, write_case

TOKEN = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"


def _b64(text: str, *, urlsafe: bool = False) -> str:
    enc = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return enc(text.encode()).decode()


def test_every_variable_holding_the_token_in_any_form_is_hidden():
    env = {
        "INPUT_GITHUB-TOKEN": TOKEN,
        "GH_AUTH_HEADER": f"Authorization: bearer {TOKEN}",
        "REMOTE": f"https://x-access-token:{TOKEN}@github.com/octo/widgets.git",
        "EXTRAHEADER": f"AUTHORIZATION: basic {_b64('x-access-token:' + TOKEN)}",  # actions/checkout
        "OAUTH_BASIC": _b64(f"{TOKEN}:x-oauth-basic", urlsafe=True),
        "USER_PAIR": _b64(f"octocat:{TOKEN}"),
        "HEXED": TOKEN.encode().hex(),
        "QUOTED": f"token%3D{TOKEN}",
        "OTHER_TOKEN_SHAPE": "ghs_" + "x" * 36,
        "PATH": "/usr/bin:/bin",
        "HALF": TOKEN[:20],
    }
    assert hidden_names(env) == [
        "EXTRAHEADER",
        "GH_AUTH_HEADER",
        "HEXED",
        "INPUT_GITHUB-TOKEN",
        "OAUTH_BASIC",
        "QUOTED",
        "REMOTE",
        "USER_PAIR",
    ]


@pytest.mark.parametrize("prefix", ["", "a", "ab", "abc", "x-access-token:"])
@pytest.mark.parametrize("suffix", ["", "z", ":x-oauth-basic"])
def test_base64_of_any_text_holding_the_token_contains_one_of_its_forms(prefix, suffix):
    for urlsafe in (False, True):
        encoded = _b64(prefix + TOKEN + suffix, urlsafe=urlsafe)
        assert any(form in encoded for form in token_forms(TOKEN)), (prefix, suffix, urlsafe)


def test_a_short_token_hides_only_exact_copies():
    """A 5-character test token must not hide PATH because "/bin" happens to contain it."""
    assert hidden_names(
        {"INPUT_GITHUB-TOKEN": "abcde", "COPY": "abcde", "LONGER": "xxabcdexx"}
    ) == ["COPY", "INPUT_GITHUB-TOKEN"]


SNOOP = r"""
import base64, glob, os, sys
needles = [n.encode() for n in open("needles.txt").read().split(",")]
if not sys.stdin.isatty():
    sys.stdin.read()
found = [k for k, v in os.environ.items() if any(n in v.encode() for n in needles)]
readable = 0
for path in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
    try:
        data = open(path, "rb").read()
    except OSError:
        continue
    readable += 1
    if any(n in data for n in needles):
        found.append(path)
print(("LEAKED " + " ".join(found)) if found else "CLEAN", file=sys.stderr)
print("CLEAN" if not found and readable else "LEAKED")
"""


def test_command_targets_find_the_token_in_no_environ_they_can_read(tmp_path):
    """The Action with the token in four other variables: the target's environment and every
    /proc/*/environ and cmdline it can open hold neither the token nor its base64 forms."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "snoop.py").write_text(SNOOP, encoding="utf-8")
    needles = ",".join(
        [GITHUB_TOKEN[4:], *[f for f in token_forms(GITHUB_TOKEN) if f != GITHUB_TOKEN]]
    )
    (suite / "needles.txt").write_text(needles)
    path = write_case(
        suite,
        {"kind": "command", "command": [sys.executable, "snoop.py"], "cwd": "."},
        {"clean": {"kind": "tool", "function": "exact_match"}},
        n=1,
    )
    (suite / "dataset.jsonl").write_text(
        json.dumps({"id": 0, "input": "x", "ground_truth": "CLEAN"}) + "\n"
    )
    extra = {
        "INPUT_COMMENT": "never",
        "GH_AUTH_HEADER": f"Authorization: bearer {GITHUB_TOKEN}",
        "CLONE_URL": f"https://x-access-token:{GITHUB_TOKEN}@github.com/octo/widgets.git",
        "GIT_EXTRAHEADER": f"AUTHORIZATION: basic {_b64('x-access-token:' + GITHUB_TOKEN)}",
        "NETRC_B64": _b64(f"machine github.com login x password {GITHUB_TOKEN}"),
    }
    proc, texts = _action(tmp_path, path, "http://127.0.0.1:9", extra)
    record = json.loads(texts["results.jsonl"])
    assert record["submission"]["clean"] == "CLEAN", record
    assert proc.returncode == 0, texts["stdout"]


PY_GRADER_SNOOP = r"""
import glob, os, subprocess
def grade(sample, item):
    needle = item["metadata"]["needle"].encode()
    hits = []
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            if needle in open(path, "rb").read():
                hits.append(path)
        except OSError:
            pass
    # a program it starts (``cat``, a fresh exec) gets no capability back either
    cat = subprocess.run(["cat", f"/proc/{os.getppid()}/environ"], capture_output=True)
    if needle in cat.stdout:
        hits.append("cat")
    print(hits, cat.returncode)
    return 0.0 if hits else 1.0
"""


def test_python_grader_cannot_read_the_model_key_from_ci_evals(tmp_path):
    """F11: outside the Action, ci-evals holds the model keys in its environment; the python
    grader's worker (and a ``cat`` it starts) cannot read them from /proc/<parent>/environ or any
    other environ, even as root: ci-evals is non-dumpable and the worker holds no capability."""
    key = "sk-proc-environ-" + os.urandom(8).hex()
    (tmp_path / "dataset.jsonl").write_text(
        json.dumps(
            {"id": 0, "input": "x", "ground_truth": "CLEAN", "metadata": {"needle": key[3:]}}
        )
        + "\n"
    )
    (tmp_path / "outputs.jsonl").write_text('{"id": 0, "output": "CLEAN"}\n')
    suite = {
        "name": "snoop",
        "dataset": "dataset.jsonl",
        "cache": False,
        "target": {"kind": "replay", "outputs": "outputs.jsonl"},
        "graders": {"snoop": {"kind": "python", "source": PY_GRADER_SNOOP}},
        "gate": {"op": "gte", "value": 1.0},
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(suite))
    proc = subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", "suite.yaml", "-o", "out", "-q"],
        cwd=tmp_path,
        env=env_with(SNOOP_API_KEY=key),
        capture_output=True,
        text=True,
        timeout=120,
    )
    row = json.loads((tmp_path / "out" / "results.jsonl").read_text())
    assert (row["grades"]["snoop"]["score"], row["grades"]["snoop"]["metadata"]["output"]) == (
        1.0,
        "[] 1\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        key.encode() not in Path(f"/proc/{os.getpid()}/environ").read_bytes()
    )  # the test's own is clean
