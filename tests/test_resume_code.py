"""F17: ``--resume`` fingerprints the suite's code; grades made by other code are never mixed in."""

from __future__ import annotations

import json
import sys

import pytest

from ci_evals.cli.app import main
from tests.conftest import replay_suite

REFUSED = (
    "cannot resume: the suite's code (graders, extractors, reward composer, setup script, rubric or prompt "
    "files) changed since this folder was written (its grades would not match); run again without --resume"
)


def _suite(sd) -> None:
    sd.write("dataset.jsonl", [{"id": i, "input": "q", "ground_truth": "a"} for i in range(4)])
    sd.write("outputs.jsonl", [{"id": i, "output": "a"} for i in range(4)])
    sd.write("helper.py", "THRESHOLD = 0.0\n")
    sd.write(
        "g.py",
        "from ci_evals import grader, GradeResult\nfrom helper import THRESHOLD\n\n@grader\n"
        "def g(sample, submission):\n    return GradeResult(score=1.0 if THRESHOLD == 0.0 else 0.0)\n",
    )
    sd.write(
        "rewards.py",
        "from ci_evals import reward_composer\n\n@reward_composer\ndef r(ctx):\n    return 1.0\n",
    )
    sd.suite(
        replay_suite(
            {"g": {"kind": "tool", "function": "g.py:g"}},
            {"metric_key": "g", "op": "gte", "value": 1.0},
            reward={"kind": "custom", "function": "rewards.py:r"},
        )
    )


def _resume(sd) -> int:
    return main(
        ["run", str(sd.root / "suite.yaml"), "--resume", str(sd.root / "out"), "-q", "--no-cache"]
    )


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("g.py", ("score=1.0 if", "score=0.5 if")),  # the grader itself
        ("helper.py", ("0.0", "0.25")),  # a module it imports from beside it
        ("rewards.py", ("return 1.0", "return 0.5")),  # the reward composer
    ],
)
def test_resume_refuses_when_the_suites_code_changed(sd, capsys, monkeypatch, name, change):
    monkeypatch.delitem(
        sys.modules, "helper", raising=False
    )  # in-process: another test's helper.py
    _suite(sd)
    assert sd.run() == 0
    before = (sd.root / "out" / "results.jsonl").read_bytes()
    summary = (sd.root / "out" / "summary.json").read_bytes()
    capsys.readouterr()
    path = sd.root / name
    path.write_text(path.read_text().replace(*change))
    assert _resume(sd) == 2
    assert capsys.readouterr().err == f"error: {sd.root / 'out'}: {REFUSED}\n"
    assert (
        sd.root / "out" / "results.jsonl"
    ).read_bytes() == before  # nothing graded by the new code
    assert (sd.root / "out" / "summary.json").read_bytes() == summary


def test_resume_with_unchanged_code_goes_on(sd, capsys):
    _suite(sd)
    assert sd.run() == 0
    assert _resume(sd) == 0
    assert json.loads((sd.root / "out" / "summary.json").read_text())["verdict"] == "passed"


def test_resume_refuses_when_a_rubric_file_changed(sd, capsys):
    sd.write(
        "dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "a", "rubric_path": "rubric.txt"}]
    )
    sd.write("outputs.jsonl", [{"id": 1, "output": "a"}])
    sd.write("rubric.txt", "Say a.")
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": "contains"}}, {"op": "gte", "value": 0.5})
    )
    assert sd.run() == 0
    (sd.root / "rubric.txt").write_text("Say b.")
    capsys.readouterr()
    assert _resume(sd) == 2
    assert capsys.readouterr().err == f"error: {sd.root / 'out'}: {REFUSED}\n"


def test_a_folder_from_before_the_code_print_is_refused(sd, capsys):
    """An older lock file has no code_sha256: it cannot show its code unchanged."""
    _suite(sd)
    assert sd.run() == 0
    lock = sd.root / "out" / ".ci-evals-run.json"
    record = json.loads(lock.read_text())
    del record["code_sha256"]
    lock.write_text(json.dumps(record))
    capsys.readouterr()
    assert _resume(sd) == 2
    assert capsys.readouterr().err == f"error: {sd.root / 'out'}: {REFUSED}\n"


def test_the_code_print_finds_the_suites_modules_by_their_real_paths(tmp_path, monkeypatch):
    """A module counts when its real file is in the suite's folder tree, however it was imported:
    through a linked file or folder, or a path with ``..``; one whose real file is elsewhere does not."""
    from types import ModuleType, SimpleNamespace

    from ci_evals.run.folderlock import code_files

    suite, elsewhere = tmp_path / "suite", tmp_path / "elsewhere"
    (suite / "pkg").mkdir(parents=True)
    elsewhere.mkdir()
    for name in ("suite.yaml", "helper.py", "target.py", "pkg/m.py", "rel.py"):
        (suite / name).write_text("")
    (elsewhere / "outside.py").write_text("")
    (elsewhere / "link.py").symlink_to(suite / "target.py")  # a file linked into the suite
    (elsewhere / "pkgdir").symlink_to(suite / "pkg")  # a folder linked into the suite
    (suite / "out.py").symlink_to(elsewhere / "outside.py")  # a link out of it: not the suite's
    spelled = {
        "helper": suite / "helper.py",
        "linked": elsewhere / "link.py",
        "through_folder": elsewhere / "pkgdir" / "m.py",
        "dotdot": suite / "pkg" / ".." / "rel.py",
        "outside": elsewhere / "outside.py",
        "out_link": suite / "out.py",
    }
    for name, path in spelled.items():
        module = ModuleType(f"code_print_{name}")
        module.__file__ = str(path)
        monkeypatch.setitem(sys.modules, module.__name__, module)
    loaded = SimpleNamespace(
        path=str(suite / "suite.yaml"),
        ctx=SimpleNamespace(files_read=[]),
        dataset=SimpleNamespace(rubric_files=[]),
    )
    assert code_files(loaded) == sorted(
        p.resolve()
        for p in (
            suite / "helper.py",
            suite / "target.py",
            suite / "pkg" / "m.py",
            suite / "rel.py",
        )
    )
