"""Re-running what failed (``--only-failed FROM``) and choosing samples (``--sample-id``, ``--sample-pattern``):
exactly those samples run, and the verdict says the run was partial, in every report."""

from __future__ import annotations

import json

from ci_evals.cli.app import main
from tests.conftest import replay_suite

DATASET = [
    {"id": i, "input": f"q {i}", "ground_truth": "yes"}
    for i in ("capital-fr", "capital-jp", "add", "multiply", "greet", "sky")
]
BAD = {
    "capital-fr": "no",
    "capital-jp": "yes",
    "add": "yes",
    "multiply": "nope",
    "sky": "yes",
}  # greet: none


def setup(sd, outputs=BAD, name="t"):
    sd.write("dataset.jsonl", DATASET)
    sd.write("outputs.jsonl", [{"id": k, "output": v} for k, v in outputs.items()])
    sd.suite(
        replay_suite(
            {"answer": {"kind": "tool", "function": "contains"}},
            {"metric_key": "answer", "metric": "accuracy", "op": "gte", "value": 0.8},
            name=name,
        )
    )


def ran(sd, out: str) -> list[str]:
    return sorted(str(r["sample_id"]) for r in sd.results(out))


def test_only_failed_reruns_the_failing_and_errored_samples_into_a_sibling_folder(sd, capsys):
    setup(sd)
    assert sd.run() == 1
    before = {p.name: p.read_bytes() for p in (sd.root / "out").iterdir() if p.is_file()}
    capsys.readouterr()
    assert sd.run("--only-failed", str(sd.root / "out")) == 1
    assert ran(sd, "out-rerun") == ["capital-fr", "greet", "multiply"]
    assert {
        p.name: p.read_bytes() for p in (sd.root / "out").iterdir() if p.is_file()
    } == before  # input untouched
    summary = sd.summary("out-rerun")
    assert summary["selection"] == {
        "by": [f"--only-failed {sd.root / 'out'}"],
        "selected": 3,
        "total": 6,
    }
    assert summary["verdict"] == "errored"
    assert summary["verdict_reason"] == (
        "answer: 1 of 3 samples errored (max_errors 0); partial run: 3 of 6 "
        f"samples (--only-failed {sd.root / 'out'})"
    )
    assert capsys.readouterr().out.splitlines()[0] == f"t: ERRORED ({summary['verdict_reason']})"
    md = (sd.root / "out-rerun" / "summary.md").read_text()
    assert f"partial run: 3 of 6 samples (--only-failed {sd.root / 'out'})" in md


def test_a_fixed_agent_passes_the_rerun_and_still_says_it_was_partial(sd, capsys):
    setup(sd)
    assert sd.run() == 1
    sd.write("outputs.jsonl", [{"id": d["id"], "output": "yes"} for d in DATASET])
    capsys.readouterr()
    code = main(
        [
            "run",
            str(sd.root / "suite.yaml"),
            "--only-failed",
            str(sd.root / "out"),
            "--output",
            str(sd.root / "again"),
            "--no-cache",
            "--dry-run",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    reason = f"1 of 1 gates passed; partial run: 3 of 6 samples (--only-failed {sd.root / 'out'})"
    assert sd.summary("again")["verdict_reason"] == reason
    assert f"Verdict: PASSED ({reason})" in out.splitlines()
    comment = out.split("--- PR comment (dry run: not posted) ---", 1)[1]
    verdict = next(ln for ln in comment.splitlines() if "Verdict" in ln)
    assert verdict == f"**Verdict: passed**: {reason}"


def test_sample_id_is_repeatable_and_an_unknown_id_is_one_line(sd, capsys):
    setup(sd)
    assert sd.run("--sample-id", "sky", "--sample-id", "add") == 0
    assert ran(sd, "out") == ["add", "sky"]
    assert (
        sd.summary()["verdict_reason"]
        == "1 of 1 gates passed; partial run: 2 of 6 samples (--sample-id add, sky)"
    )
    capsys.readouterr()
    assert sd.run("--sample-id", "sky", "--sample-id", "skye") == 2
    assert (
        capsys.readouterr().err
        == f"error: {sd.root / 'dataset.jsonl'}: no sample with id 'skye' in this dataset\n"
    )


def test_sample_pattern_glob_and_regex(sd, capsys):
    setup(sd)
    assert sd.run("--sample-pattern", "capital-*", out="glob") == 1
    assert ran(sd, "glob") == ["capital-fr", "capital-jp"]
    assert sd.run("--sample-pattern", "re:^(add|mul)", out="rx") == 1
    assert ran(sd, "rx") == ["add", "multiply"]
    assert sd.summary("rx")["selection"] == {
        "by": ["--sample-pattern re:^(add|mul)"],
        "selected": 2,
        "total": 6,
    }
    capsys.readouterr()
    assert sd.run("--sample-pattern", "apital*") == 2  # a glob matches the whole id, not a part
    assert capsys.readouterr().err == (
        f"error: {sd.root / 'dataset.jsonl'}: no sample id matches --sample-pattern 'apital*'\n"
    )
    assert sd.run("--sample-pattern", "re:(") == 2
    assert capsys.readouterr().err.startswith(
        "error: --sample-pattern: invalid regular expression: "
    )


def test_filters_combine(sd, capsys):
    setup(sd)
    assert sd.run() == 1
    assert sd.run("--only-failed", str(sd.root / "out"), "--sample-pattern", "*i*", out="both") == 1
    assert ran(sd, "both") == ["capital-fr", "multiply"]
    capsys.readouterr()
    assert sd.run("--only-failed", str(sd.root / "out"), "--sample-id", "sky", out="none") == 2
    assert (
        capsys.readouterr().err
        == f"error: {sd.root / 'out'}: none of the --sample-id ids failed in this folder ('sky')\n"
    )


def test_only_failed_refuses_what_it_cannot_trust_or_use(sd, capsys, tmp_path):
    setup(sd)
    assert sd.run() == 1
    folder = sd.root / "out"
    lines = (folder / "results.jsonl").read_text().splitlines()
    capsys.readouterr()

    (folder / "results.jsonl").write_text(
        "\n".join([lines[0], json.dumps({"sample_id": [1], "grades": {}}), *lines[2:]]) + "\n"
    )
    assert sd.run("--only-failed", str(folder), out="x") == 2
    assert capsys.readouterr().err == (
        f"error: {folder / 'results.jsonl'}:2: results.jsonl: 'sample_id' must be "
        "a string or an integer\n"
    )

    (folder / "summary.json").unlink()
    assert sd.run("--only-failed", str(folder), out="x") == 2
    assert capsys.readouterr().err == f"error: {folder}: no summary.json in this folder\n"

    setup(sd, {d["id"]: "yes" for d in DATASET})
    assert sd.run(out="good") == 0
    capsys.readouterr()
    assert sd.run("--only-failed", str(sd.root / "good"), out="x") == 2
    assert capsys.readouterr().err == (
        f"error: {sd.root / 'good'}: nothing to re-run: no sample failed or errored "
        "in this folder\n"
    )

    setup(sd, name="other")
    assert sd.run(out="other") == 1
    setup(sd)
    capsys.readouterr()
    assert sd.run("--only-failed", str(sd.root / "other"), out="x") == 2
    assert capsys.readouterr().err == (
        f"error: {sd.root / 'other'}: --only-failed: this folder holds results of "
        "suite 'other', not 't'\n"
    )
    assert not (sd.root / "x").exists()
