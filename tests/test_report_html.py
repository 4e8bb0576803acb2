"""report.html without a browser: the data block, caps, the row limit, older folders, the CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ci_evals.cli.app import main
from ci_evals.gating import comparison as comparison_mod
from ci_evals.gating.baseline import compare_folder
from ci_evals.reports import html
from ci_evals.reports import report_data as data_mod
from ci_evals.results.files import Trust
from tests import reportdata as rd
from tests.conftest import replay_suite

BLOCK = r'<script type="application/json" id="{}">(.*?)</script>'


def merged(data_text: str, details_text: str) -> dict:
    """The page's data with each row's detail merged in, as report.js does on first use."""
    data = json.loads(data_text)
    for row, detail in zip(data["rows"], json.loads(details_text), strict=True):
        for k, v in detail.items():
            if k in ("grades", "baseline"):
                for name, g in v.items():
                    row[k][name] = {**row[k].get(name, {}), **g}
            else:
                row[k] = v
    return data


def page_data(text: str) -> dict:
    return merged(
        *(
            re.search(BLOCK.format(b), text, re.S).group(1)
            for b in ("report-data", "report-details")
        )
    )


def build(*args, **kwargs) -> tuple[dict, dict]:
    data, details, scan = data_mod.build_data(*args, **kwargs)
    return merged(data, details), scan


def test_script_json_escapes_what_could_end_or_start_markup():
    text = data_mod.script_json({"a": "</script><!-- & \u2028\u2029 >"})
    assert text == '{"a":"\\u003c/script\\u003e\\u003c!-- \\u0026 \\u2028\\u2029 \\u003e"}'
    assert json.loads(text) == {"a": "</script><!-- & \u2028\u2029 >"}


def test_long_text_is_cut_with_its_full_length():
    assert comparison_mod.capped("x" * 10, 4) == {"text": "xxxx", "length": 10}
    assert comparison_mod.capped("short", 10) == "short"
    assert comparison_mod.capped({"k": 1}, 100) == '{"k": 1}'
    assert comparison_mod.capped(None, 10) is None


def test_report_embeds_every_row_with_its_baseline_and_regressions(tmp_path: Path):
    base = rd.baseline_folder(tmp_path / "baseline")
    folder = rd.write_folder(tmp_path / "run", rd.summary(baseline=base), rd.records())
    summary = json.loads((folder / "summary.json").read_text())
    comparison = compare_folder(summary, folder, base, Trust.OTHER)
    text = html.write_report(folder, summary, comparison).read_text()
    data = page_data(text)
    assert [(r["id"], r["model"], r["run"]) for r in data["rows"]] == [
        ("s1", "gpt-a", 0),
        ("s1", "gpt-a", 1),
        ("s1", "gpt-b", 0),
        ("s2", "gpt-a", 0),
        ("s3", "gpt-a", 0),
        ("s4", "gpt-b", 0),
    ]
    s2 = data["rows"][3]
    assert s2["regressed"] == ["answer"]
    assert s2["baseline"]["answer"] == {
        "score": 1.0,
        "passed": True,
        "rationale": "baseline said Paris",
    }
    assert s2["turns"][0][2]["tool_calls"] == [
        {"id": "call_1", "name": "web_search", "arguments": '{"query": "capital of France"}'}
    ]
    assert data["rows"][5]["error"] == {"category": "target", "message": "boom: agent crashed"}
    assert data["has_baseline"] is True and data["total_rows"] == 6


def test_csp_allows_only_the_reports_own_script_and_style_by_hash(tmp_path: Path):
    folder = rd.write_folder(tmp_path / "run", rd.summary(), rd.records())
    text = html.write_report(folder, rd.summary()).read_text()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text).group(1)
    script = re.search(r"<script>(.*?)</script>", text, re.S).group(1)
    style = re.search(r"<style>(.*?)</style>", text, re.S).group(1)

    def digest(s: str) -> str:
        return "sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()

    assert csp == (
        f"default-src 'none'; script-src '{digest(script)}'; style-src '{digest(style)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    assert not re.search(
        r"""(src|href)=["']?(https?:)?//""", text
    )  # nothing to fetch from anywhere


def test_the_summary_text_is_escaped_by_the_template(tmp_path: Path):
    s = rd.summary()
    s["suite"] = "<script>alert(1)</script>"
    folder = rd.write_folder(tmp_path / "run", s, rd.records())
    text = html.write_report(folder, s).read_text()
    assert "<script>alert(1)</script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_agent_imports_cut_off_unanswered_are_listed_as_maybe_left_over(tmp_path: Path):
    s = rd.summary()
    s["letta"] = {
        "leftover_agents": [],
        "kept_agents": [],
        "unanswered_imports": ["<b>echo</b>"],
        "base_url": "http://letta:8283",
    }
    folder = rd.write_folder(tmp_path / "run", s, rd.records())
    text = html.write_report(folder, s).read_text()
    assert (
        "<tr><td>unknown</td><td>&lt;b&gt;echo&lt;/b&gt;</td><td>maybe left over: its import (or "
        "agent_script) had not answered when its sample was cut off</td></tr>"
    ) in text
    del s["letta"]
    assert 'id="letta"' not in html.write_report(folder, s).read_text()


def test_a_summary_without_a_verdict_is_shown_as_having_none(tmp_path: Path):
    s = rd.summary(verdict=None)  # its gate failed: the page still decides nothing
    folder = rd.write_folder(tmp_path / "none", s, rd.records())
    text = html.write_report(folder, s).read_text()
    assert "<title>NO VERDICT · ci-evals" in text
    assert '<header class="verdict v-none">' in text
    assert '<span id="verdict">NO VERDICT</span>' in text
    assert "FAILED" not in text


def test_an_older_summary_without_the_new_fields_still_renders(tmp_path: Path):
    s = rd.summary(new_fields=False)
    folder = rd.write_folder(tmp_path / "old", s, rd.records())
    text = html.write_report(folder, s).read_text()
    # no verdict recorded: shown as none, never decided again from its gates
    assert '<span id="verdict">NO VERDICT</span>' in text
    assert '<header class="verdict v-none">' in text
    assert (
        '<p id="verdict-words">summary.json records no verdict '
        "(written by another tool or an older version).</p>"
    ) in text
    assert "<td>answer</td>" in text  # no label: the metric key
    assert '<td class="num">5</td>' in text  # graded = n - errors
    # errors.groups absent: grouped from results.jsonl
    assert re.search(
        r"<td>target</td><td>–</td><td class=\"msg\">boom: agent crashed</td><td class=\"num\">1</td>",
        text,
    )


def test_text_cap_shrinks_until_the_data_fits(tmp_path: Path):
    recs = [rd.record(f"s{i}", answer="y" * 5000, tool=False) for i in range(20)]
    folder = rd.write_folder(tmp_path / "big", rd.summary(n=20), recs)
    text, details, _ = data_mod.build_data(
        rd.summary(n=20), folder / "results.jsonl", max_bytes=60_000
    )
    data = merged(text, details)
    assert len(text.encode()) + len(details.encode()) <= 60_000
    assert data["text_cap"] < 5000
    assert data["rows"][0]["grades"]["answer"]["submission"] == {
        "text": "y" * data["text_cap"],
        "length": 5000,
    }


def test_when_even_the_smallest_cut_does_not_fit_failing_rows_stay_first(tmp_path: Path):
    recs = [rd.record(f"p{i}", score=1.0, answer="y" * 5000) for i in range(40)]
    recs += [rd.record(f"f{i}", score=0.0, answer="y" * 5000) for i in range(5)]
    folder = rd.write_folder(tmp_path / "big", rd.summary(n=45), recs)
    text, details, scan = data_mod.build_data(
        rd.summary(n=45), folder / "results.jsonl", max_bytes=20_000
    )
    data = merged(text, details)
    ids = {r["id"] for r in data["rows"]}
    assert (
        len(text.encode()) + len(details.encode()) <= 20_000
        and data["text_cap"] == data_mod.MIN_TEXT_CAP
    )
    assert {f"f{i}" for i in range(5)} <= ids and 5 < len(ids) < 45
    assert (scan["shown"], scan["failing_shown"], scan["limit"]) == (len(ids), 5, len(ids))


def test_beyond_the_row_limit_failing_rows_stay_and_the_rest_is_sampled(tmp_path: Path):
    recs = [rd.record(f"p{i}", score=1.0, tool=False) for i in range(50)]
    recs += [rd.record(f"f{i}", score=0.0, tool=False) for i in range(5)]
    folder = rd.write_folder(tmp_path / "big", rd.summary(n=55), recs)
    data, scan = build(rd.summary(n=55), folder / "results.jsonl", max_rows=20)
    ids = [r["id"] for r in data["rows"]]
    assert len(ids) == 20 and {f"f{i}" for i in range(5)} <= set(ids)
    assert (scan["total"], scan["failing_total"], scan["failing_shown"], scan["others_total"]) == (
        55,
        5,
        5,
        50,
    )
    again, _ = build(rd.summary(n=55), folder / "results.jsonl", max_rows=20)
    assert [r["id"] for r in again["rows"]] == ids  # seeded: the same sample every time


def test_every_run_and_merge_write_report_html(sd):
    sd.write(
        "dataset.jsonl",
        [{"id": f"s{i}", "input": f"q{i}", "ground_truth": "yes"} for i in range(6)],
    )
    sd.write(
        "outputs.jsonl", [{"id": f"s{i}", "output": "yes" if i % 2 else "no"} for i in range(6)]
    )
    sd.suite(replay_suite({"c": {"kind": "tool", "function": "contains"}}, None))
    for k in (1, 2):
        sd.run("--shard", f"{k}/2", out=f"shard{k}")
    assert (sd.root / "shard1" / "report.html").is_file()
    rc = main(
        [
            "merge",
            str(sd.root / "shard1"),
            str(sd.root / "shard2"),
            "--output",
            str(sd.root / "merged"),
        ]
    )
    assert rc == 0
    data = page_data((sd.root / "merged" / "report.html").read_text())
    assert sorted(r["id"] for r in data["rows"]) == [f"s{i}" for i in range(6)]
    assert (
        data["rows"][0]["turns"][0][-1]["role"] == "assistant"
    )  # results.jsonl keeps the trajectory


def test_report_command_rebuilds_the_page(tmp_path: Path, capsys):
    folder = rd.write_folder(tmp_path / "run", rd.summary(), rd.records())
    assert main(["report", str(folder)]) == 0
    assert capsys.readouterr().out == f"Report: {folder / 'report.html'}\n"
    assert len(page_data((folder / "report.html").read_text())["rows"]) == 6


def test_report_command_takes_a_baseline_folder(tmp_path: Path):
    base = rd.baseline_folder(tmp_path / "baseline")
    folder = rd.write_folder(tmp_path / "run", rd.summary(), rd.records())
    assert main(["report", str(folder), "--baseline", str(base)]) == 0
    data = page_data((folder / "report.html").read_text())
    assert data["has_baseline"] is True and data["rows"][3]["regressed"] == ["answer"]


def test_report_command_bad_folders_are_one_line_exit_2(tmp_path: Path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert (
        capsys.readouterr().err == f"error: {tmp_path / 'nope'}: no summary.json in this folder\n"
    )
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "summary.json").write_text("{oops")
    assert main(["report", str(tmp_path / "bad")]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: {tmp_path / 'bad' / 'summary.json'}: summary.json is not valid JSON"
    )
    (tmp_path / "bad" / "summary.json").write_text("{}")
    assert main(["report", str(tmp_path / "bad")]) == 2
    assert (
        capsys.readouterr().err == f"error: {tmp_path / 'bad'}: no results.jsonl in this folder\n"
    )
    folder = rd.write_folder(tmp_path / "run", rd.summary(), rd.records())
    assert main(["report", str(folder), "--baseline", str(tmp_path / "nope")]) == 2
    assert (
        capsys.readouterr().err
        == f"error: {tmp_path / 'nope'}: no results.jsonl in the baseline folder\n"
    )


def test_report_open_hands_the_file_to_the_local_browser(tmp_path: Path, monkeypatch, capsys):
    import webbrowser

    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda uri: opened.append(uri) or True)
    folder = rd.write_folder(tmp_path / "run", rd.summary(), rd.records())
    assert main(["report", str(folder), "--open"]) == 0
    assert opened == [(folder / "report.html").resolve().as_uri()]
    monkeypatch.setattr(webbrowser, "open", lambda uri: False)
    assert main(["report", str(folder), "--open"]) == 0
    assert capsys.readouterr().err == "could not open a browser; open the file above yourself\n"


def test_the_template_ships_as_package_data():
    from importlib import resources

    names = {p.name for p in resources.files("ci_evals.reports").joinpath("templates").iterdir()}
    assert {"report.html.j2", "report.js", "report.css"} <= names
    pyproject = Path(__file__).parents[1].joinpath("pyproject.toml").read_text()
    assert '"reports/templates/*"' in pyproject


def test_a_text_said_twice_is_stored_once(tmp_path: Path):
    rec = rd.record("s1", answer="Paris, surely")
    rec["trajectory"]["turns"][0][0]["content"] = rec["input"]
    folder = rd.write_folder(tmp_path / "run", rd.summary(), [rec])
    row = build(rd.summary(), folder / "results.jsonl")[0]["rows"][0]
    assert row["grades"]["answer"]["submission"] == "Paris, surely"
    assert row["grades"]["style"]["submission"] == {"ref": "answer"}
    assert row["turns"][0][-1] == {"role": "assistant", "content": {"ref": "answer"}}
    assert row["turns"][0][0] == {"role": "user", "content": {"input": 0}}


def test_empty_entries_are_left_out_of_the_rows(tmp_path: Path):
    folder = rd.write_folder(tmp_path / "run", rd.summary(), [rd.record("s1", score=0.0, tags=())])
    row = build(rd.summary(), folder / "results.jsonl")[0]["rows"][0]
    assert row["grades"]["answer"] == {
        "score": 0.0,
        "rationale": "answer rationale s1",
        "submission": "Paris",
    }
    assert not {"model", "tags", "error", "regressed", "baseline", "cost", "target"} & set(row)


def test_the_table_part_holds_no_text_of_the_run(tmp_path: Path):
    folder = rd.write_folder(
        tmp_path / "run", rd.summary(), [rd.record("s1", error="agent crashed")]
    )
    data, details, _ = data_mod.build_data(rd.summary(), folder / "results.jsonl")
    assert json.loads(data)["rows"] == [
        {
            "id": "s1",
            "run": 0,
            "tags": ["geo"],
            "tokens": 0,
            "duration": 0.25,
            "grades": {
                "answer": {"score": 0.0, "error": True},
                "style": {"score": 0.0, "error": True},
            },
            "error": {"category": "target"},
        }
    ]
    assert "agent crashed" in details


def test_a_row_is_regressed_only_when_its_sample_regressed_after_the_reducer(tmp_path: Path):
    """One definition of a regression, the gates': with ``pass_at_k`` a sample whose second run
    now fails still passes, so neither of its rows is regressed (the page's own per-run rule
    marked run 1 before); a sample whose every run fails now regressed, and so do both its rows."""

    def folder(name: str, runs: dict[str, tuple[float, float]], verdict: str) -> Path:
        recs = [
            rd.record(sid, run=i, score=s)
            for sid, scores in runs.items()
            for i, s in enumerate(scores)
        ]
        s = rd.summary(verdict=verdict, n=len(recs))
        s["config"]["reducer"] = "pass_at_k"
        return rd.write_folder(tmp_path / name, s, recs)

    base = folder("base", {"s1": (1.0, 1.0), "s2": (1.0, 1.0)}, "passed")
    run = folder("run", {"s1": (1.0, 0.0), "s2": (0.0, 0.0)}, "failed")
    summary = json.loads((run / "summary.json").read_text())
    comparison = compare_folder(summary, run, base, Trust.OTHER)
    assert comparison.block["regressions"] == [
        {"sample_id": "s2", "model": None, "metric": "answer"}
    ]
    data = page_data(html.write_report(run, summary, comparison).read_text())
    assert [(r["id"], r["run"], r.get("regressed", [])) for r in data["rows"]] == [
        ("s1", 0, []),
        ("s1", 1, []),
        ("s2", 0, ["answer"]),
        ("s2", 1, ["answer"]),
    ]
    assert data["rows"][1]["baseline"]["answer"] == {
        "score": 1.0,
        "passed": True,
        "rationale": "answer rationale s1",
    }


def test_the_report_command_compares_with_the_baseline_it_is_given(tmp_path: Path, capsys):
    """summary.json's baseline block names another comparison: the page shows the one
    ``--baseline`` makes (its regressions, its figures), not a union with the recorded one."""
    base = rd.baseline_folder(tmp_path / "baseline")
    s = rd.summary(baseline=base)
    s["baseline"]["regressions"].append({"sample_id": "s1", "model": "gpt-a", "metric": "style"})
    folder = rd.write_folder(tmp_path / "run", s, rd.records())
    assert main(["report", str(folder), "--baseline", str(base)]) == 0
    text = (folder / "report.html").read_text()
    data = page_data(text)
    assert {r["id"]: r.get("regressed", []) for r in data["rows"] if r["model"] == "gpt-a"} == {
        "s1": [],
        "s2": ["answer"],
        "s3": [],
    }
    assert "regressions 1, improvements 0, new 2, removed 0" in text


def test_a_baseline_of_another_suite_shows_no_columns_and_says_why(tmp_path: Path, capsys):
    base = rd.baseline_folder(tmp_path / "baseline")
    other = json.loads((base / "summary.json").read_text())
    other["suite"] = "another-suite"
    (base / "summary.json").write_text(json.dumps(other))
    folder = rd.write_folder(tmp_path / "run", rd.summary(), rd.records())
    assert main(["report", str(folder), "--baseline", str(base)]) == 0
    assert capsys.readouterr().err == (
        "note: not compared with the baseline: the baseline is of suite 'another-suite', "
        "not 'geo-suite'\n"
    )
    data = page_data((folder / "report.html").read_text())
    assert data["has_baseline"] is False and not any(r.get("regressed") for r in data["rows"])


def test_a_run_reads_its_baseline_once(sd, monkeypatch):
    from ci_evals.results import files

    sd.write(
        "dataset.jsonl",
        [{"id": f"s{i}", "input": f"q{i}", "ground_truth": "yes"} for i in range(4)],
    )
    sd.write("outputs.jsonl", [{"id": f"s{i}", "output": "yes"} for i in range(4)])
    sd.suite(replay_suite({"c": {"kind": "tool", "function": "contains"}}, None))
    assert sd.run(out="base") == 0
    sd.write(
        "outputs.jsonl", [{"id": f"s{i}", "output": "no" if i == 1 else "yes"} for i in range(4)]
    )
    reads: list[Path] = []
    real = files.iter_records

    def counted(path: Path, *args, **kwargs):
        reads.append(Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(files, "iter_records", counted)
    sd.run("--baseline", str(sd.root / "base"))
    assert reads.count(sd.root / "base" / "results.jsonl") == 1
    summary = sd.summary()
    assert summary["baseline"]["regressions"] == [{"sample_id": "s1", "model": None, "metric": "c"}]
    data = page_data((sd.root / "out" / "report.html").read_text())
    assert data["has_baseline"] is True
    assert {r["id"]: r.get("regressed", []) for r in data["rows"]} == {
        "s0": [],
        "s1": ["c"],
        "s2": [],
        "s3": [],
    }


def test_the_template_loads_though_user_code_left_jinja2s_folder_listed_as_empty():
    """A grader closing descriptors 1 and 2 while the template's import listed jinja2's folder
    made Python cache that folder as empty: report.html failed with "No module named
    'jinja2.bccache'" and the run exited 3 (the test suite met it once). A new process, its cached
    listing of the folder emptied as that race leaves it, still renders the page."""
    script = (
        "import importlib.machinery, importlib.util, os, sys\n"
        "folder = os.path.dirname(importlib.util.find_spec('jinja2').origin)\n"
        "finder = importlib.machinery.FileFinder(\n"
        "    folder,\n"
        "    (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES),\n"
        "    (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES),\n"
        ")\n"
        "finder._path_cache, finder._path_mtime = set(), os.stat(folder).st_mtime  # CPython's\n"
        "sys.path_importer_cache[folder] = finder\n"
        "try:\n"
        "    import jinja2\n"
        "except ModuleNotFoundError as exc:\n"
        "    print('poisoned:', exc)\n"
        "from ci_evals.reports import html\n"
        "print(type(html.template()).__name__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(html.__file__).parents[2])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert (out.stdout, out.stderr) == (
        "poisoned: No module named 'jinja2.bccache'\nTemplate\n",
        "",
    )
