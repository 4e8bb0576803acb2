"""Dataset loading: JSONL and CSV fields, ids, text kept as text, filters, errors naming file and line."""

from __future__ import annotations

import pytest

from ci_evals._util.errors import ConfigError
from ci_evals.config.dataset import Dataset, shard_of


def load(tmp_path, name, text, **kw):
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    ds = Dataset(p, **kw)
    ds.scan()
    return ds, list(ds)


def test_jsonl_fields_and_extra_columns(tmp_path):
    _, samples = load(
        tmp_path,
        "d.jsonl",
        (
            '{"id": "a", "input": "q", "ground_truth": "x", "metadata": {"topic": "t"}, "tags": ["k"],'
            ' "agent_args": {"m": 1}, "rubric_vars": {"r": "v"}, "reference_answer": "ref"}\n'
        ),
    )
    s = samples[0]
    assert (
        s.id,
        s.input,
        s.ground_truth,
        s.metadata,
        s.tags,
        s.agent_args,
        s.rubric_vars,
        s.extra_vars,
    ) == ("a", "q", "x", {"topic": "t"}, ["k"], {"m": 1}, {"r": "v"}, {"reference_answer": "ref"})
    assert s.item()["reference_answer"] == "ref"


def test_jsonl_ids_default_to_row_index_and_blank_lines_are_skipped(tmp_path):
    _, samples = load(
        tmp_path, "d.jsonl", '{"input": "a"}\n\n{"input": "b"}\n{"id": 99, "input": "c"}\n'
    )
    assert [s.id for s in samples] == [0, 1, 99]


def test_jsonl_numeric_ground_truth_becomes_text(tmp_path):
    _, samples = load(
        tmp_path,
        "d.jsonl",
        '{"input": "a", "ground_truth": 4}\n{"input": "b", "ground_truth": 2.5}\n',
    )
    assert [s.ground_truth for s in samples] == ["4", "2.5"]


def test_multi_turn_input(tmp_path):
    _, samples = load(tmp_path, "d.jsonl", '{"input": ["hi", "again"]}\n')
    assert samples[0].input == ["hi", "again"]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            '{"input": "a"}\n{"input": "b",}\n',
            2,
            "invalid JSON at column 15: Expecting property name enclosed in double quotes",
        ),
        ('{"input": "a"}\n[1]\n', 2, "each line must be a JSON object, got list"),
        ('{"inptu": "a"}\n', 1, "missing required field 'input'"),
        ('{"input": 3}\n', 1, "'input' must be a string or a list of strings, got int"),
        ('{"input": []}\n', 1, "'input' must be a string or a non-empty list of strings"),
        ('{"input": "a", "metadata": "x"}\n', 1, "'metadata' must be a JSON object"),
        ('{"input": "a", "tags": "x"}\n', 1, "'tags' must be a list of strings"),
        (
            '{"id": 1, "input": "a"}\n{"id": 1, "input": "b"}\n',
            2,
            "duplicate sample id 1 (first on line 1)",
        ),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, text, line, message):
    with pytest.raises(ConfigError) as exc:
        load(tmp_path, "d.jsonl", text)
    assert str(exc.value) == f"{tmp_path / 'd.jsonl'}:{line}: {message}"


def test_non_utf8_line_is_named(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load(tmp_path, "d.jsonl", b'{"input": "a"}\n{"input": "\xff"}\n')
    assert str(exc.value) == f"{tmp_path / 'd.jsonl'}:2: not UTF-8 text (byte 11)"


def test_empty_dataset_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load(tmp_path, "d.jsonl", "\n")
    assert str(exc.value) == f"{tmp_path / 'd.jsonl'}: dataset is empty"


def test_unsupported_format(tmp_path):
    (tmp_path / "d.txt").write_text("x")
    with pytest.raises(ConfigError) as exc:
        Dataset(tmp_path / "d.txt")
    assert (
        str(exc.value)
        == f"{tmp_path / 'd.txt'}: unsupported dataset format '.txt'; use .jsonl or .csv"
    )


def test_csv_keeps_cell_text_and_parses_json_cells(tmp_path):
    _, samples = load(
        tmp_path,
        "d.csv",
        (
            "id,input,ground_truth,metadata,rubric_vars,tags,extra\n"
            '7,What is 2+2?,4,"{""topic"": ""math""}","{""ref"": ""four""}","a,b",x\n'
            ',"[""hi"", ""there""]",,,,,\n'
            "abc,q,04,,,,\n"
        ),
    )
    a, b, c = samples
    assert (a.id, a.ground_truth, a.metadata, a.rubric_vars, a.tags, a.extra_vars) == (
        7,
        "4",
        {"topic": "math"},
        {"ref": "four"},
        ["a", "b"],
        {"extra": "x"},
    )
    assert (b.id, b.input, b.ground_truth, b.metadata) == (1, ["hi", "there"], None, {})
    assert (c.id, c.ground_truth) == ("abc", "04")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "question,answer\nq,a\n",
            "1: missing required column 'input'. Found columns: ['question', 'answer']",
        ),
        ("", "1: CSV file is empty (no header row)"),
        (
            "input,metadata\nq,{bad\n",
            "2: 'metadata' cell is not valid JSON at character 2 of the cell: Expecting property name enclosed in double quotes",
        ),
        ("input,ground_truth\nq,a,extra\n", "2: row has 3 cells, header has 2"),
    ],
)
def test_csv_errors(tmp_path, text, message):
    with pytest.raises(ConfigError) as exc:
        load(tmp_path, "d.csv", text)
    assert str(exc.value) == f"{tmp_path / 'd.csv'}:{message}"


def test_sample_tags_filter_then_max_samples(tmp_path):
    text = "".join(
        f'{{"id": {i}, "input": "q", "tags": ["{"even" if i % 2 == 0 else "odd"}"]}}\n'
        for i in range(10)
    )
    ds, samples = load(tmp_path, "d.jsonl", text, sample_tags=["even"], max_samples=3)
    assert [s.id for s in samples] == [0, 2, 4]
    assert ds.count == 3


def test_no_sample_with_tag_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load(tmp_path, "d.jsonl", '{"input": "q", "tags": ["a"]}\n', sample_tags=["zz"])
    assert (
        str(exc.value) == f"{tmp_path / 'd.jsonl'}: no sample selected with any of the tags ['zz']"
    )


def test_shards_partition_the_samples(tmp_path):
    text = "".join(f'{{"id": "s{i}", "input": "q"}}\n' for i in range(50))
    seen = []
    for k in (1, 2, 3):
        p = tmp_path / f"d{k}.jsonl"
        p.write_text(text)
        ds = Dataset(p, shard=(k, 3))
        ds.scan()
        ids = [s.id for s in ds]
        assert all(shard_of(i, 3) == k - 1 for i in ids)
        seen += ids
    assert sorted(seen) == sorted(f"s{i}" for i in range(50))


def test_shard_of_is_stable():
    assert [shard_of(x, 4) for x in (0, 1, "a", "sample-17")] == [1, 3, 3, 0]
