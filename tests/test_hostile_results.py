"""A results folder from elsewhere (issue 23 F3-F9): one line per hostile file, no symlink followed,
no input overwritten, no path followed outside the allowed root, no comment of another suite touched.

``ci-evals report`` and ``merge`` take the folder as an argument (exit 2); the Action's results mode
takes it as another job's artifact (exit 1: a foreign artifact never passes). The bad-input corpus
(tests/bad_inputs/report_*, merge_*) covers the same inputs in a fresh process each.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ci_evals.action import main as action
from ci_evals.cli.app import main
from ci_evals.reports.comment import marker
from ci_evals.results.writer import open_atomic
from tests.fakes.github_server import github_server_fixture  # noqa: F401 (fixture)
from tests.test_action import BAD, GOOD, gh_env, read_outputs, write_suite  # noqa: F401 (fixture)

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def run_folder(tmp_path, monkeypatch) -> Path:
    """A real results folder (4 samples, gate failed) under a work directory that is the CWD."""
    work = tmp_path / "work"
    suite = write_suite(work / "suite", "bad", BAD)
    monkeypatch.chdir(work)
    assert main(["run", str(suite), "--output", "out", "-q"]) == 1
    return work / "out"


def _edit_summary(folder: Path, **changes) -> None:
    doc = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    doc.update(changes)
    (folder / "summary.json").write_text(json.dumps(doc), encoding="utf-8")


def _err_lines(capsys) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


# ---------------------------------------------------------------- F3-F5: report and merge, exit 2


@pytest.mark.parametrize(
    ("summary_text", "line"),
    [
        (DEEP, "summary.json: nested more than 200 levels deep"),
        (
            b'{"suite": "bad", "duration_s": Infinity}',
            "summary.json: Infinity is not valid JSON (numbers must be finite)",
        ),
        (
            b'{"suite": "\\udfff"}',
            "summary.json: a lone surrogate escape (\\ud800-\\udfff) is not text",
        ),
        (b'{"suite": "\xc3("}', "summary.json: not UTF-8 text (byte 0xc3 at offset 11)"),
        (
            b'{"verdict": "Passed"}',
            "summary.json: 'verdict' must be one of passed, failed, errored, interrupted, "
            'partial, not "Passed"',
        ),
        (
            b'{"verdict": "passed", "records": -1}',
            "summary.json: 'records' must be a non-negative integer",
        ),
        (
            b'{"verdict": "passed", "shard": [1, 1]}',
            "summary.json: 'shard' must be an object",
        ),
        (
            b'{"verdict": "passed", "errors": {"by_category": "x"}}',
            "summary.json: errors.by_category must be an object",
        ),
        (
            b'{"verdict": "failed", "metrics": {"q": {"mean": 0.5, "ci_mean": [0, "1"]}}}',
            "summary.json: metrics.q.ci_mean[1] must be a number",
        ),
    ],
)
def test_report_on_a_hostile_summary_is_one_line_exit_2(run_folder, capsys, summary_text, line):
    data = summary_text.encode() if isinstance(summary_text, str) else summary_text
    (run_folder / "summary.json").write_bytes(data)
    before = (run_folder / "report.html").read_bytes()
    capsys.readouterr()
    assert main(["report", "out"]) == 2
    assert _err_lines(capsys) == [f"error: out/summary.json: {line}"]
    assert (run_folder / "report.html").read_bytes() == before  # nothing rewritten


def test_report_on_a_hostile_results_line_names_the_line(run_folder, capsys):
    lines = (run_folder / "results.jsonl").read_bytes().splitlines(keepends=True)
    lines[2] = b'{"sample_id": "c", "grades": {}, "input": "\\ud83d"}\n'  # half of a surrogate pair
    (run_folder / "results.jsonl").write_bytes(b"".join(lines))
    capsys.readouterr()
    assert main(["report", "out"]) == 2
    assert _err_lines(capsys) == [
        "error: out/results.jsonl:3: results.jsonl: a lone surrogate escape "
        "(\\ud800-\\udfff) is not text"
    ]


def test_a_whole_surrogate_pair_and_a_torn_last_line_are_read(run_folder, capsys):
    """The variation that must still work: an escaped emoji is text; a killed writer's last line is skipped."""
    lines = (run_folder / "results.jsonl").read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[0])
    rec["input"] = "\\ud83d\\ude00"
    lines[0] = json.dumps(rec).replace("\\\\ud83d\\\\ude00", "\\ud83d\\ude00").encode() + b"\n"
    (run_folder / "results.jsonl").write_bytes(b"".join(lines) + b'{"sample_id": "e", "gra')
    capsys.readouterr()
    assert main(["report", "out"]) == 0
    assert capsys.readouterr().out == "Report: out/report.html\n"
    assert "\U0001f600" in (run_folder / "report.html").read_text(encoding="utf-8")


def test_merge_of_a_shard_whose_field_is_a_string_is_one_line(run_folder, tmp_path, capsys):
    _edit_summary(run_folder, shard="1/1")
    capsys.readouterr()
    assert main(["merge", "out", "--output", "merged"]) == 2
    assert _err_lines(capsys) == [
        "error: out/summary.json: summary.json: 'shard' must be an object"
    ]
    assert not Path("merged").exists()


def test_merge_of_a_deep_results_line_is_one_line_and_writes_nothing(run_folder, capsys):
    with (run_folder / "results.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"sample_id": "z", "grades": {}, "metadata": ' + DEEP + "}\n")
    capsys.readouterr()
    assert main(["merge", "out", "--output", "merged"]) == 2
    assert _err_lines(capsys) == [
        "error: out/results.jsonl:5: results.jsonl: nested more than 200 levels deep"
    ]
    assert sorted(os.listdir("merged")) == []  # the temporary results.jsonl was removed


# ---------------------------------------------------------------- F3-F5: Action results mode, exit 1


@pytest.mark.parametrize(
    ("name", "data", "line"),
    [
        (
            "summary.json",
            DEEP.encode(),
            "summary.json: summary.json: nested more than 200 levels deep",
        ),
        (
            "summary.json",
            b'{"verdict": "passed", "n_samples": NaN}',
            "summary.json: summary.json: NaN is not valid JSON (numbers must be finite)",
        ),
        (
            "summary.json",
            b'{"verdict": "PASSED"}',
            "summary.json: summary.json: 'verdict' must be one of passed, "
            'failed, errored, interrupted, partial, not "PASSED"',
        ),
        (
            "summary.json",
            b'{"verdict": "passed "}',
            "summary.json: summary.json: 'verdict' must be one of passed, "
            'failed, errored, interrupted, partial, not "passed "',
        ),
        (
            "summary.json",
            b'{"verdict": ["passed"]}',
            "summary.json: summary.json: 'verdict' must be one of passed, "
            'failed, errored, interrupted, partial, not ["passed"]',
        ),
        (
            "summary.json",
            b'{"verdict": "passed", "shard": "1/1"}',
            "summary.json: summary.json: 'shard' must be an object",
        ),
        (
            "summary.json",
            b'{"verdict": "failed", "gates": [{"children": [{"n": "4"}]}]}',
            "summary.json: summary.json: gates[0].children[0].n must be a non-negative integer",
        ),
        (
            "results.jsonl",
            b'{"sample_id": 1, "grades": {}}\n{"sample_id": 2, "grades": {"a": {"score": 1e400}}}\n',
            "results.jsonl:2: results.jsonl: the number 1e400 is too large (numbers must be finite)",
        ),
        (
            "results.jsonl",
            b'{"sample_id": 1, "grades": {}}\n\xfe\xff\n{"sample_id": 3, "grades": {}}\n',
            "results.jsonl:2: results.jsonl: not UTF-8 text (byte 0xfe at offset 0)",
        ),
    ],
)
def test_results_mode_on_a_hostile_artifact_is_one_error_exit_1_and_no_comment(
    tmp_path,
    gh_env,
    capsys,
    name,
    data,
    line,
):
    env, gh = gh_env
    art = tmp_path / "artifact"
    art.mkdir()
    (art / "summary.json").write_text(
        '{"verdict": "passed", "suite": "prod", "n_samples": 2}', encoding="utf-8"
    )
    (art / name).write_bytes(data)
    env.update({"INPUT_RESULTS": str(art), "INPUT_PR-NUMBER": "7"})
    capsys.readouterr()
    assert action.run_action(env) == 1
    out = capsys.readouterr().out
    errors = [ln for ln in out.splitlines() if ln.startswith("::error")]
    assert errors == [
        f"::error title=ci-evals not a ci-evals results folder (exit 1)::not a ci-evals results "
        f"folder: {art}/{line}"
    ]
    outputs = read_outputs(tmp_path / "output.txt")
    assert (
        outputs["passed"],
        outputs["verdict"],
        outputs["exit-code"],
        outputs["summary-json"],
    ) == ("false", "errored", "1", "")
    assert gh.writes() == []  # nothing to post: no comment is made from a foreign artifact
    step = (tmp_path / "step_summary.md").read_text(encoding="utf-8")
    assert (
        f"{art}: not a ci-evals results folder (exit 1)" in step and "Traceback" not in out + step
    )


# ---------------------------------------------------------------- F6: no symlink followed


@pytest.fixture
def outside(tmp_path) -> Path:
    path = tmp_path / "outside.txt"
    path.write_text("precious\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "name",
    [
        "summary.md",
        "summary.json",
        "junit.xml",
        "report.html",
        "results.jsonl",
        ".ci-evals-run.json",
    ],
)
def test_a_run_refuses_a_symlink_planted_in_its_folder_before_running(
    tmp_path, outside, capsys, name
):
    suite = write_suite(tmp_path / "s", "good", GOOD)
    out = tmp_path / "out"
    out.mkdir()
    (out / name).symlink_to(outside)
    assert main(["run", str(suite), "--output", str(out), "-q"]) == 2
    assert _err_lines(capsys) == [
        f"error: {out / name}: refusing to write through a symlink in the results folder"
    ]
    assert outside.read_text(encoding="utf-8") == "precious\n"
    assert sorted(p.name for p in out.iterdir()) == [name]  # nothing ran, nothing else was written


def test_report_refuses_a_symlinked_report_html_and_a_dangling_one_creates_nothing(
    run_folder, tmp_path, outside, capsys
):
    (run_folder / "report.html").unlink()
    (run_folder / "report.html").symlink_to(outside)
    capsys.readouterr()
    assert main(["report", "out"]) == 2
    assert _err_lines(capsys) == [
        "error: out/report.html: refusing to write through a symlink in the results folder"
    ]
    assert outside.read_text(encoding="utf-8") == "precious\n"
    (run_folder / "report.html").unlink()
    (run_folder / "report.html").symlink_to(
        tmp_path / "not-yet"
    )  # variation: a link to a file that does not exist
    assert main(["report", "out"]) == 2
    assert not (tmp_path / "not-yet").exists()


def test_merge_refuses_a_symlink_in_its_output_folder(run_folder, outside, capsys):
    Path("merged").mkdir()
    Path("merged/summary.md").symlink_to(outside)
    capsys.readouterr()
    assert main(["merge", "out", "--output", "merged"]) == 2
    assert _err_lines(capsys) == [
        "error: merged/summary.md: refusing to write through a symlink in the results folder"
    ]
    assert outside.read_text(encoding="utf-8") == "precious\n"


def test_another_runs_summary_json_that_is_a_symlink_is_not_read(run_folder, tmp_path, capsys):
    real = tmp_path / "elsewhere.json"
    real.write_bytes((run_folder / "summary.json").read_bytes())
    (run_folder / "summary.json").unlink()
    (run_folder / "summary.json").symlink_to(real)
    capsys.readouterr()
    assert main(["report", "out"]) == 2
    assert _err_lines(capsys) == [
        "error: out/summary.json: is a symlink; a results folder from elsewhere must hold "
        "its own files"
    ]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "summary.md"
    target.write_text("old\n", encoding="utf-8")
    with pytest.raises(RuntimeError), open_atomic(target) as fh:
        fh.write("half of the new")
        raise RuntimeError("disk full")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]
    with open_atomic(target) as fh:
        fh.write("new\n")
    assert (
        target.read_text(encoding="utf-8") == "new\n"
        and oct(target.stat().st_mode & 0o777) == "0o644"
    )


# ---------------------------------------------------------------- F7: baseline.folder stays inside the allowed root


@pytest.fixture
def secret_baseline(tmp_path) -> Path:
    """A results folder outside the work directory whose rationale must never reach a report."""
    folder = tmp_path / "private"
    suite = write_suite(tmp_path / "private-suite", "bad", GOOD)
    assert main(["run", str(suite), "--output", str(folder), "-q"]) == 0
    lines = [
        json.loads(x) for x in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    for rec in lines:
        rec["grades"]["answer"]["rationale"] = "PRIVATE-RATIONALE-42"
    (folder / "results.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8"
    )
    return folder


@pytest.mark.parametrize("ref", ["../private", "ABSOLUTE", "link-out"])
def test_report_does_not_follow_baseline_folder_outside_the_current_directory(
    run_folder, secret_baseline, capsys, ref
):
    if ref == "ABSOLUTE":
        ref = str(secret_baseline)
    if ref == "link-out":  # inside by name, outside once the symlink is resolved
        Path("link-out").symlink_to(secret_baseline)
    _edit_summary(run_folder, baseline={"folder": ref, "missing": None, "metrics": {}})
    capsys.readouterr()
    assert main(["report", "out"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "Report: out/report.html\n"
    assert captured.err == (
        f"note: out/summary.json: the baseline folder it names ({ref!r}) is outside the current "
        "directory: not read (pass --baseline to compare)\n"
    )
    page = (run_folder / "report.html").read_text(encoding="utf-8")
    assert "PRIVATE-RATIONALE-42" not in page and '"has_baseline":false' in page


def test_report_follows_a_baseline_folder_inside_the_current_directory(
    run_folder, secret_baseline, capsys
):
    os.rename(
        secret_baseline, "baseline"
    )  # the variation that must keep working: CI's side-by-side layout
    _edit_summary(run_folder, baseline={"folder": "baseline", "missing": None, "metrics": {}})
    capsys.readouterr()
    assert main(["report", "out"]) == 0
    assert capsys.readouterr().err == ""
    page = (run_folder / "report.html").read_text(encoding="utf-8")
    assert "PRIVATE-RATIONALE-42" in page and '"has_baseline":true' in page


# ---------------------------------------------------------------- F8: merge never overwrites an input


@pytest.mark.parametrize(
    ("output", "line"),
    [
        (
            "out",
            "error: out: --output is the input folder out; write the merge to a folder of its own",
        ),
        (
            "alias",
            "error: alias: --output is the input folder out; write the merge to a folder of its own",
        ),
        (
            "out/sub",
            "error: out/sub: --output lies inside the input folder out; write the merge to a folder of its own",
        ),
        (
            ".",
            "error: .: --output holds the input folder out; write the merge to a folder of its own",
        ),
    ],
)
def test_merge_refuses_an_output_that_overlaps_an_input(run_folder, capsys, output, line):
    Path("alias").symlink_to("out")
    before = {p.name: p.read_bytes() for p in run_folder.iterdir()}
    capsys.readouterr()
    assert main(["merge", "out", "--output", output]) == 2
    assert _err_lines(capsys) == [line]
    assert {p.name: p.read_bytes() for p in run_folder.iterdir()} == before


# ---------------------------------------------------------------- F9: an artifact reaches only its own comment


def _artifact(folder: Path, suite: str, verdict: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "suite": suite,
                "verdict": verdict,
                "n_samples": 1,
                "records": 1,
                "metrics": {},
                "gates": [],
            }
        ),
        encoding="utf-8",
    )
    (folder / "results.jsonl").write_text('{"sample_id": 1, "grades": {}}\n', encoding="utf-8")
    return folder


def test_a_forged_artifact_naming_another_suite_leaves_that_suites_comment_alone(
    tmp_path, gh_env, capsys
):
    env, gh = gh_env
    ours = gh.add_comments(
        7,
        [marker("prod:evals") + "\nprod failed (posted by the prod suite's own job)"],
        author={"login": "github-actions[bot]", "type": "Bot"},
    )[0]
    real = _artifact(tmp_path / "prod-results", "prod", "failed")
    env.update({"INPUT_RESULTS": str(real)})
    assert action.run_action(env) == 1
    first = [c for c in gh.comments[7] if c["id"] != ours["id"]]
    assert len(first) == 1 and first[0]["body"].startswith(
        marker(f"prod-results:evals:results={real}")
    )
    forged = _artifact(
        tmp_path / "fork-results", "prod", "passed"
    )  # the fork claims to be suite prod
    env.update({"INPUT_RESULTS": str(forged)})
    assert action.run_action(env) == 0
    bodies = {c["id"]: c["body"] for c in gh.comments[7]}
    assert (
        bodies[ours["id"]]
        == marker("prod:evals") + "\nprod failed (posted by the prod suite's own job)"
    )
    assert (
        bodies[first[0]["id"]] == first[0]["body"]
    )  # the real artifact's comment is untouched as well
    assert len(bodies) == 3 and any(
        b.startswith(marker(f"fork-results:evals:results={forged}")) for b in bodies.values()
    )
    # The same folder again updates its own comment and no other.
    assert action.run_action(env) == 0
    assert len(gh.comments[7]) == 3
