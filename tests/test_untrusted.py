"""Untrusted content, end to end: what a model or a dataset says cannot take over the reports or the run.

* Model output and dataset text full of HTML, ``<script>``, @mentions, fences, links, markers and
  very long lines go through a real run; summary.md, the PR comment (``render_comment`` over the
  run's results) and junit.xml keep their structure: no raw HTML, no pings, no links, no broken fence.
* The python grader's limits hold inside a suite: a sample whose grader allocates without bound or
  loops forever errors, the other samples are graded, and the run finishes.
* ``multi`` formulas that try to escape are rejected when the suite loads (exit 2), before any code
  runs; one that overflows is an error of that sample only.

(Unit-level escaping, the python grader's own limits and the formula grammar are tested in
test_reports_markdown.py, test_github_comment.py, test_python_grader.py and test_multi_grader.py.)
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET

import pytest

from ci_evals.cli.app import main
from ci_evals.reports.comment import marker, render_comment
from ci_evals.reports.text import ZWJ
from ci_evals.reports.write import own_results
from tests.conftest import replay_suite

EVIL = (
    "<script>alert('x')</script> <img src=x onerror=alert(1)> hey @octocat and @org/team, see #123 and GH-45; "
    "[click me](https://evil.example/phish) ![x](https://evil.example/t.png) <https://evil.example/auto> "
    "</details></summary> <!-- ci-evals:untrusted:evals --> | a | b | ```"
)
EVIL_BLOCK = (
    EVIL + "\n```\n~~~\n# Heading\n> quote\n<details open><summary>injected</summary>\n````\n"
)
CONTROL = "\x1b[31mred\x1b[0m bell\x07 nul\x00 vt\x0b end"
LONG = "L" * 200_000
OUR_TAGS = {"details", "summary", "sub"}
MENTIONS = ("@octocat", "@org", "@admin", "@boss", "#123", "GH-45")


def evil_suite(sd) -> None:
    sd.write(
        "dataset.jsonl",
        [
            {
                "id": "<b>@boss</b>",
                "input": EVIL_BLOCK,
                "ground_truth": "@admin [x](javascript:alert(1))",
            },
            {"id": 2, "input": "plain", "ground_truth": "<script>gt</script>"},
            {"id": 3, "input": LONG, "ground_truth": "yes"},
            {"id": 4, "input": CONTROL, "ground_truth": "yes"},
            {"id": 5, "input": "fine", "ground_truth": "fine"},
        ],
    )
    sd.write(
        "outputs.jsonl",
        [
            {"id": "<b>@boss</b>", "output": EVIL_BLOCK},
            {"id": 2, "output": "```\n" + EVIL + "\n```"},
            {"id": 3, "output": LONG},
            {"id": 4, "output": CONTROL},
            {"id": 5, "output": "fine"},
        ],
    )
    # The rationale echoes the model output: grader text is untrusted too.
    sd.write(
        "g.py",
        "from ci_evals import grader, GradeResult\n\n@grader\ndef parrot(sample, submission):\n"
        "    return GradeResult(score=1.0 if submission == sample.ground_truth else 0.0,\n"
        "                       rationale='you said: ' + submission)\n",
    )
    sd.suite(
        replay_suite(
            {
                "parrot": {"kind": "tool", "function": "g.py:parrot"},
                "<b>@team</b>": {"kind": "tool", "function": "exact_match"},
            },
            {"metric_key": "parrot", "op": "gte", "value": 0.9},
            name="untrusted @octocat <i>x</i>",
        )
    )


def split_fences(markdown: str) -> tuple[list[str], list[str]]:
    """(lines outside code fences, lines inside); fails if a fence is left open."""
    outside, inside = [], []
    fence: tuple[str, int] | None = None
    for line in markdown.splitlines():
        m = re.match(r"^(`{3,}|~{3,})(.*)$", line)
        if fence is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = (m.group(1)[0], len(m.group(1)))
                inside.append(line)
            else:
                outside.append(line)
        else:
            inside.append(line)
            if (
                m
                and m.group(1)[0] == fence[0]
                and len(m.group(1)) >= fence[1]
                and not m.group(2).strip()
            ):
                fence = None
    assert fence is None, "a code fence is never closed"
    return outside, inside


def check_markdown(markdown: str, *, marker: str | None = None) -> None:
    outside, _ = split_fences(markdown)
    text = "\n".join(outside)
    tags = {m.group(1).lower() for m in re.finditer(r"<(?:/)?([A-Za-z][\w:-]*)", text)}
    assert tags <= OUR_TAGS, f"raw HTML outside a code block: {sorted(tags - OUR_TAGS)}"
    assert "<details " not in text and "<summary " not in text  # no attributes (open, onclick...)
    assert not re.search(r"(?<!\\)\]\(", text), "a markdown link or image outside a code block"
    comments = re.findall(r"<!--.*?-->", text)
    assert comments == ([marker] if marker else []), comments
    shown = re.sub(r"<!--.*?-->", "", text)  # an HTML comment is not rendered
    for mention in MENTIONS:
        assert mention not in shown, f"{mention!r} would ping or link"
    assert text.count("<details>") == text.count("</details>")
    assert text.count("<summary>") == text.count("</summary>")
    # Tables keep their shape: every row has the header's number of cell separators.
    rows: list[str] = []
    for line in [*outside, ""]:
        if line.startswith("|"):
            rows.append(line)
            continue
        if rows:
            widths = {len(re.findall(r"(?<!\\)\|", r)) for r in rows}
            assert len(widths) == 1, rows
            rows = []
    for line in outside:
        assert not re.match(r"^#{1,6} .*(Heading|injected)", line) and not line.startswith(
            "> quote"
        ), line


def test_model_output_and_dataset_text_cannot_inject_into_reports(sd):
    evil_suite(sd)
    assert sd.run() == 1
    out = sd.root / "out"
    rows = sd.results()
    # results keep the raw text up to the per-field cap, then say how long it was
    assert (
        len(rows) == 5
        and rows[2]["submission"]["parrot"]
        == LONG[:100_000] + "… [truncated by ci-evals: 200,000 characters in all]"
    )
    assert rows[2]["truncated"] == {
        "input": 200_000,
        "submission.parrot": 200_000,
        "grades.parrot.rationale": 200_010,
        "trajectory.turns[0][0].content": 200_000,
    }
    md = (out / "summary.md").read_text(encoding="utf-8")
    check_markdown(md)
    assert max(len(line) for line in md.splitlines()) < 2_000
    assert f"@{ZWJ}octocat" in md  # neutralised, still readable

    summary = sd.summary()
    body = render_comment(
        summary, own_results(out / "results.jsonl"), run_url=None, marker_key="untrusted:evals"
    )
    assert body.startswith(marker("untrusted:evals") + "\n")
    check_markdown(body, marker=marker("untrusted:evals"))
    assert len(body) <= 65_536
    _, inside = split_fences(body)
    assert any(
        "<!-- ci-evals:untrusted:evals -->" in line for line in inside
    )  # the fake marker stays fenced
    assert "<script>alert('x')</script>" in "\n".join(inside)  # shown verbatim, inside a code block


def test_junit_stays_well_formed_with_control_characters_and_markup(sd):
    evil_suite(sd)
    sd.run()
    root = ET.parse(sd.root / "out" / "junit.xml").getroot()
    names = {case.get("name") for case in root.iter("testcase")}
    assert len([n for n in names if n and "boss" in n]) == 1
    assert len(list(root.iter("testcase"))) >= 10


def test_dry_run_prints_a_comment_that_keeps_its_shape(sd, capsys):
    evil_suite(sd)
    rc = main(
        [
            "run",
            str(sd.root / "suite.yaml"),
            "--output",
            str(sd.root / "out"),
            "--no-cache",
            "-q",
            "--dry-run",
        ]
    )
    assert rc == 1
    out = capsys.readouterr().out
    body = out.split("--- PR comment (dry run: not posted) ---\n", 1)[1].split(
        "\n--- end of PR comment ---", 1
    )[0]
    check_markdown(body, marker=re.search(r"<!-- ci-evals:[^>]*-->", body).group(0))


# ---------------------------------------------------------------- python grader limits inside a suite

PY_SOURCE = """
def grade(sample, item):
    kind = item["input"]
    if kind == "alloc":
        hog = []
        while True:
            hog.append(bytearray(64 * 1024 * 1024))
    if kind == "loop":
        while True:
            pass
    if kind == "write":
        with open("pwned.txt", "w") as fh:
            fh.write("x")
    if kind == "shout":
        print("spam " * 100_000)
    return 1.0
"""


def test_python_grader_limits_hold_within_a_run(sd):
    kinds = ["alloc", "ok1", "loop", "ok2", "write", "shout", "ok3"]
    sd.write("dataset.jsonl", [{"id": i, "input": k} for i, k in enumerate(kinds)])
    sd.write("outputs.jsonl", [{"id": i, "output": "x"} for i in range(len(kinds))])
    sd.suite(
        replay_suite(
            {
                "py": {
                    "type": "python",
                    "name": "py",
                    "source": PY_SOURCE,
                    "timeout": 3.0,
                    "memory_limit_mb": 256,
                    "workers": 2,
                }
            },
            {"op": "gte", "value": 0.5, "max_errors": 2},
            max_concurrent=3,
        )
    )
    t0 = time.monotonic()
    assert sd.run() == 0
    assert time.monotonic() - t0 < 20
    rows = {r["input"]: r["grades"]["py"] for r in sd.results()}
    assert set(rows) == set(kinds)
    assert rows["alloc"]["error"].startswith("python grader: MemoryError")
    assert (
        rows["loop"]["error"] == "python grader: timed out after 3 s"
    )  # 3 s: MemoryError comes first under load
    for k in ("ok1", "ok2", "write", "shout", "ok3"):
        assert (rows[k]["score"], rows[k]["error"]) == (1.0, None), k
    assert len(rows["shout"]["metadata"]["output"]) <= 2000
    assert not (
        sd.root / "pwned.txt"
    ).exists()  # the grader's working directory is a throwaway folder
    assert sd.summary()["errors"]["by_category"] == {"target": 0, "extraction": 0, "grading": 2}


# ---------------------------------------------------------------- multi formulas


@pytest.mark.parametrize(
    ("formula", "message"),
    [
        (
            "__import__('os').system('touch pwned')",
            "calls '__import__('os').system': only min, max",
        ),
        (
            "a.__class__.__mro__[1].__subclasses__()",
            "calls 'a.__class__.__mro__[1].__subclasses__': only min, max",
        ),
        ("a.__class__", "uses attribute access, which is not allowed"),
        (
            "eval('1')",
            "calls 'eval': only min, max, abs, floor, ceil, exp, sqrt, log may be called",
        ),
        ("open('/etc/passwd')", "calls 'open': only min, max"),
        ("max(a, " * 45 + "a" + ")" * 45, "is nested more than 40 levels deep"),
        (" + ".join(["a"] * 500), "characters long (at most 1000)"),
    ],
)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_escaping_formulas_are_rejected_at_load(sd, capsys, formula, message, command):
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "a"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "a"}])
    sd.suite(
        replay_suite(
            {
                "m": {
                    "type": "multi",
                    "calculate_output": formula,
                    "graders": {"a": {"kind": "tool", "function": "exact_match"}},
                }
            },
            {"op": "gte", "value": 0.5},
        )
    )
    argv = [command, str(sd.root / "suite.yaml")] + (
        ["--output", str(sd.root / "out")] if command == "run" else []
    )
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (sd.root / "pwned").exists() and not (sd.root / "out" / "results.jsonl").exists()


def test_overflowing_formula_errors_each_sample_and_the_run_finishes(sd):
    sd.write("dataset.jsonl", [{"id": i, "input": "q", "ground_truth": "a"} for i in range(3)])
    sd.write("outputs.jsonl", [{"id": i, "output": "a"} for i in range(3)])
    sd.suite(
        replay_suite(
            {
                "m": {
                    "type": "multi",
                    "calculate_output": "9 ^ 9 ^ 9 ^ (a + 8)",
                    "graders": {"a": {"kind": "tool", "function": "exact_match"}},
                }
            },
            {"op": "gte", "value": 0.5},
        )
    )
    t0 = time.monotonic()
    assert sd.run() == 1
    assert time.monotonic() - t0 < 5
    rows = sd.results()
    assert [r["grades"]["m"]["error"] for r in rows] == [
        "calculate_output '9 ^ 9 ^ 9 ^ (a + 8)': numeric overflow"
    ] * 3
    assert sd.summary()["errors"]["by_category"]["grading"] == 3
