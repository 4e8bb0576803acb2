"""A summary.json or a results.jsonl record from elsewhere, validated against the contract.

The shapes are :mod:`ci_evals.results.records`' TypedDicts, validated with pydantic's
``TypeAdapter`` (nothing is converted: the caller keeps the document it read). A document of
another shape is one line naming the first key that is wrong (``gates[0].children[1].n must be a
non-negative integer``), so a foreign value never reaches a renderer or a gate. Decoding (UTF-8,
finite numbers, nesting depth, size) is :mod:`ci_evals.results.files`' part. The JSON Schemas
published in docs/schemas/ are :func:`json_schemas` (tests/test_contract.py keeps them in step).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ci_evals._util.schemas import portable
from ci_evals._util.text import shorten
from ci_evals.results.records import Grade, ResultRecord, Shard, Summary


@cache
def summary_adapter() -> TypeAdapter[Summary]:
    """Built on first use, like :func:`record_adapter`: building both is 30 ms of a run's start,
    and a fresh run reads no document from elsewhere."""
    return TypeAdapter(Summary)


@cache
def record_adapter() -> TypeAdapter[ResultRecord]:
    return TypeAdapter(ResultRecord)


_PHRASES = {
    "missing": "is required",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "int_type": "must be a non-negative integer",
    "float_type": "must be a number",
    "too_short": "must be a list of two numbers",
    "too_long": "must be a list of two numbers",
}
_UNION = "must be a string or an integer"  # the one union of two types: sample_id


def _path(loc: tuple[int | str, ...]) -> str:
    """``('gates', 0, 'children', 1, 'n')`` as ``gates[0].children[1].n``; a top-level key quoted."""
    if not loc:
        return "the document"
    if len(loc) == 1:
        return f"'{shorten(str(loc[0]), 40)}'"
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + shorten(part, 40)
    return out


def _phrase(err: Mapping[str, Any]) -> str:  # pydantic's ErrorDetails
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in ("greater_than_equal", "less_than_equal"):
        bound = ctx.get("ge", ctx.get("le"))
        if isinstance(err["input"], int) and not isinstance(err["input"], bool) and bound == 0:
            return "must be a non-negative integer"
        if bound == 1:
            return "must be an integer of at least 1"
        return "must be a number"  # our only other bounds: the finite range of a JSON number
    if kind == "literal_error":
        given = shorten(json.dumps(err["input"], default=str), 40)
        expected = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        return f"must be one of {expected}, not {given}"
    return _PHRASES.get(kind, shorten(err["msg"], 80))


def _problem(exc: ValidationError) -> str:
    """The first error as one line: where, and what it must be."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    # A union reports one error per member, its name in the location: say it once, at the key.
    members = {"str", "int"}
    if loc and loc[-1] in members and len(errors) > 1 and tuple(errors[1]["loc"])[-1] in members:
        return f"{_path(loc[:-1])} {_UNION}"
    return f"{_path(loc)} {_phrase(first)}"


def summary_problem(summary: Any) -> str | None:
    """What makes a summary.json from elsewhere unusable (a baseline, a shard, an artifact), or None."""
    try:
        summary_adapter().validate_python(summary)
    except ValidationError as exc:
        return _problem(exc)
    return _shard_problem(summary.get("shard"))


def _shard_problem(shard: Shard | None) -> str | None:
    if shard is not None and shard.get("index", 1) > shard.get("count", shard.get("index", 1)):
        return "'shard' must have 1 <= index <= count"
    return None


def is_result_record(rec: Any) -> bool:
    """The shape every results.jsonl line of ci-evals has (what ``--resume`` and ``merge`` need)."""
    return isinstance(rec, dict) and "sample_id" in rec and isinstance(rec.get("grades"), dict)


def record_problem(rec: Any) -> str | None:
    """What makes a results.jsonl record from elsewhere unusable (baseline, merge, resume, report), or None."""
    if not is_result_record(rec):
        return "not a ci-evals results record (it needs 'sample_id' and 'grades')"
    try:
        record_adapter().validate_python(rec)
    except ValidationError as exc:
        return _problem(exc)
    return _grades_problem(rec["grades"].items())


def _grades_problem(grades: Iterable[tuple[str, Grade]]) -> str | None:
    """A grade without an error must have a score (an errored grade's is null)."""
    for name, grade in grades:
        if grade.get("score") is None and not grade.get("error"):
            return f"grades.{shorten(str(name), 40)}.score must be a number"
    return None


def json_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schemas of summary.json and of a results.jsonl line, generated from the types."""
    out = {}
    for name, adapter, title in (
        ("summary.schema.json", summary_adapter(), "ci-evals summary.json"),
        ("result-line.schema.json", record_adapter(), "ci-evals results.jsonl line"),
    ):
        schema = portable(adapter.json_schema())
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
        schema["title"] = title
        out[name] = schema
    return out


def schema_text(schema: dict[str, Any]) -> str:
    """A schema as published: stable key order, two-space indent, one trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
