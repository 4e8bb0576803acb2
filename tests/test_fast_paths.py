"""The 100k-sample fast paths (issue 21 item 7) give exactly what the plain paths give."""

from __future__ import annotations

import gc
import heapq
import json
import math
import random
from xml.sax.saxutils import escape, quoteattr

from ci_evals._util import gcpolicy
from ci_evals._util.bounds import NOT_READ, loads, orjson_loads, quick_loads
from ci_evals.config.dataset import Dataset
from ci_evals.config.rows import RowChecker
from ci_evals.reports import junit
from ci_evals.reports.digest import Digester, row_failures
from ci_evals.results.files import own_loads


def test_orjson_leaves_to_json_what_it_would_read_otherwise():
    assert orjson_loads(b'{"id": 18446744073709551616}') is NOT_READ  # orjson: a float
    assert loads('{"id": 18446744073709551616}') == {"id": 18446744073709551616}
    assert orjson_loads(b'{"a": "\\ud800"}') is NOT_READ and loads('{"a": "\\ud800"}') == {
        "a": "\ud800"
    }
    assert orjson_loads(b'{"a": NaN}') is NOT_READ
    assert orjson_loads(b'{"a": 1.5e-07, "b": -0.0, "c": [true, null]}') == {
        "a": 1.5e-07,
        "b": -0.0,
        "c": [True, None],
    }
    assert quick_loads(b"[" * 101 + b"]" * 101) is NOT_READ  # deep: left to loads, which refuses it


def test_our_own_lines_read_as_json_reads_them():
    assert own_loads(b'{"sample_id": 123456789012345678901234, "x": 1}\n') == {
        "sample_id": 123456789012345678901234,
        "x": 1,
    }
    assert math.isnan(own_loads(b'{"x": NaN}\n')["x"])
    assert own_loads(b'{"x": "caf\xe9"}\n') == {"x": "caf\ufffd"}  # not UTF-8: replaced, as before
    assert own_loads(b'{"sample_id": 1, "gra') is None  # torn


def test_the_worst_failing_lines_are_heapq_nsmallest_ties_included():
    rng = random.Random(4)
    rows = [
        {
            "sample_id": rng.choice(["a", "b", 3, 10]),
            "run": rng.randrange(2),
            "model": rng.choice([None, "m"]),
            "error": None if rng.random() > 0.1 else {"category": "target"},
            "grades": {
                "g": {
                    "score": rng.choice([0.0, 0.25, 0.5, None]),
                    "passed": rng.random() > 0.6,
                    "error": None if rng.random() > 0.1 else "x",
                }
            },
        }
        for _ in range(400)
    ]
    want = heapq.nsmallest(
        10,
        (r for r in rows if not r.get("error") and row_failures(r)),
        key=lambda r: (
            min(float(g.get("score") or 0.0) for _, g in row_failures(r)),
            str(r.get("sample_id")),
            r.get("run") or 0,
            str(r.get("model") or ""),
        ),
    )
    d = Digester(10)
    for row in rows:
        d.add(row)
    assert [id(r) for r in d.digest.worst] == [id(r) for r in want]
    assert d.digest.failing_rows == sum(1 for r in rows if not r.get("error") and row_failures(r))


def test_junit_escapes_as_the_standard_library_does():
    for cp in [*range(0x100), 0x2028, 0xD800, 0xDFFF, 0xFFFE, 0xFFFF, 0x1F389]:
        for text in (chr(cp), f"a{chr(cp)}b"):
            assert junit._text(text) == escape(junit._clean(text))
            assert junit._attr(text) == quoteattr(junit._clean(text), {'"': "&quot;"})


def test_a_plain_row_gives_the_sample_the_checked_path_gives(tmp_path):
    rows = [
        {"input": "q2", "tags": ["x"], "metadata": {"k": [1]}},
        {"id": 1, "input": "q", "ground_truth": "a"},
        {"id": "s", "input": "q3", "ground_truth": None, "metadata": {}},
        {"id": 2, "input": "q", "tags": []},
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    check = RowChecker(path)
    for index, row in enumerate(rows):
        fast = check.fields(index + 1, index, dict(row), from_csv=False)
        slow = check.fields(
            index + 1, index, {**row, "rubric": None}, from_csv=False
        )  # a key the fast path leaves
        assert fast == slow
    ds = Dataset(path)
    assert ds.scan() == 4 and [s.id for s in ds] == [0, 1, "s", 2]


def test_the_gc_policy_is_undone_after_its_block():
    before = gc.get_threshold()
    with gcpolicy.streaming():
        assert gc.get_threshold()[0] == max(before[0], gcpolicy.YOUNG_THRESHOLD)
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def _json_script(data) -> str:
    """script_json as json writes it (the reference orjson must match)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    for char, esc in {
        "<": "\\u003c",
        ">": "\\u003e",
        "&": "\\u0026",
        "\u2028": "\\u2028",
        "\u2029": "\\u2029",
    }.items():
        text = text.replace(char, esc)
    return text


def test_report_rows_are_the_text_json_writes():
    from pathlib import PurePosixPath

    from ci_evals.reports.report_data import script_json

    row = {
        "id": "s-1",
        "grades": {"q": {"score": 0.75, "passed": True}},
        "tokens": 12,
        "duration": 0.001234,
        "cost": None,
        "tags": ["a", "ü"],
        "text": '</script><b>x & y</b>\u2028\u2029 "q" \\ \n\t\x01 🎉',
        "path": PurePosixPath("/x/y"),
        "deep": [[{"k": [1, 2.5, -0.0, False]}]],
    }
    assert script_json(row) == _json_script(row)
    for refused in (
        {"n": 2**70},
        {"s": "lone \ud800"},
        {"hist": {3: 1}},
    ):  # what orjson leaves to json
        assert script_json(refused) == _json_script(refused)


def test_a_results_line_is_compact_json_that_reads_back_as_the_record():
    from ci_evals.results.line import encode_line

    rec = {
        "sample_id": "s-1",
        "run": 0,
        "model": None,
        "input": 'héllo \u2028 "q" \\ \n\t\x01 🎉 </b>',
        "grades": {"q": {"score": 0.75, "passed": True, "metadata": {"n": [1, 2.5, -0.0, False]}}},
        "usage": {"prompt_tokens": 3},
        "duration_s": 0.001234,
        "tags": ("a", "b"),
    }
    line = encode_line(rec)
    assert line == json.dumps(rec, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(line) == {**rec, "tags": ["a", "b"]}
    assert (
        encode_line({"score": math.nan, "x": [math.inf]}) == '{"score":null,"x":[null]}'
    )  # as bounds.dumps


def test_what_orjson_would_write_otherwise_is_written_by_json():
    import dataclasses
    import datetime

    from ci_evals.results.line import encode_line

    @dataclasses.dataclass
    class Point:
        x: int

    class Score(float):  # numpy's float64 is one
        pass

    for rec in (
        {"n": 2**70},
        {"s": "lone \ud800"},
        {"hist": {3: 1}},
        {"p": Point(1)},
        {"f": Score(0.5)},
        {"at": datetime.datetime(2026, 1, 2, 3, 4, 5)},
        {"set": {1}},
    ):
        assert encode_line(rec) == json.dumps(
            rec, ensure_ascii=False, default=str, separators=(",", ":")
        ), rec
