"""What one results.jsonl line may hold: no secret, no field over the cap, each submission once.

Every string of a record (model output, dataset text, rationales, error messages) is scrubbed of
secrets and cut to :data:`FIELD_CAP` characters before it is written; a cut field ends with a note
and the record's ``truncated`` maps its path to the original length. Graders that saw the same
long submission (they share an extractor) store it once: the others are listed in
``submission_same_as``. Read submissions back with :func:`submission_of` / :func:`submissions_of`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import orjson

from ci_evals._util.bounds import dumps
from ci_evals._util.redact import MASK, scrub_with
from ci_evals.results.records import ResultRecord

_ORJSON_OPTS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
FIELD_CAP = 100_000
"""Characters kept per stored text field (results.jsonl); graders always see the whole text."""
SHARE_MIN = 256
"""Submissions at least this long are stored once when several graders saw the same text."""


def cut_note(length: int) -> str:
    return f"… [truncated by ci-evals: {length:,} characters in all]"


def _refuse(value: Any) -> Any:
    raise TypeError


def encode_line(rec: Mapping[str, Any]) -> str:
    """One results.jsonl line: compact JSON, UTF-8 text unescaped, a non-finite number as null.

    orjson writes it at a fifth of ``json``'s cost (the encoding was a fifth of a replay run's
    time). Anything orjson would write otherwise than ``json`` (an integer over 64 bits, a lone
    surrogate, a key that is not a string, a float subclass such as numpy's, a dataclass, a datetime,
    deeper than 255 levels, a cycle) is written by ``json`` instead, as it always was (``str()`` for
    what is not JSON). Strings are escaped alike by both, so a secret's JSON form is the same."""
    try:
        return orjson.dumps(rec, default=_refuse, option=_ORJSON_OPTS).decode("utf-8")
    except TypeError:  # orjson.JSONEncodeError included
        return dumps(rec, ensure_ascii=False, default=str, separators=(",", ":"))


def record_line(
    rec: ResultRecord, secrets: list[str], cap: int = FIELD_CAP
) -> tuple[str, ResultRecord]:
    """(the JSON line to write, the record as written): :func:`finish_record` at the cost of one
    :func:`encode_line` for the usual record, which has no long field and nothing to mask."""
    _share_submissions(rec)
    line = encode_line(rec)
    if len(line) > cap:  # some field may be over the cap: the slow, exact way
        rec = finish_record(json.loads(line), secrets, cap)
        return encode_line(rec), rec
    masked = scrub_json_text(line, secrets)
    if masked == line:
        return line, rec
    try:
        written: ResultRecord = json.loads(masked)
        return masked, written
    except ValueError:  # a mask that broke the JSON: mask string by string instead
        rec = finish_record(json.loads(line), secrets, cap)
        return encode_line(rec), rec


@functools.lru_cache(maxsize=256)
def _json_form(secret: str) -> str:
    return json.dumps(secret, ensure_ascii=False)[1:-1]


def scrub_json_text(line: str, secrets: list[str]) -> str:
    """Every secret and secret-shaped string masked in a JSON document's text (the patterns
    never match a quote or a backslash, so the document stays valid)."""
    for secret in secrets:
        escaped = _json_form(secret)
        if escaped in line:
            line = line.replace(escaped, MASK)
    return scrub_with(line, secrets)


def finish_record(rec: ResultRecord, secrets: list[str], cap: int = FIELD_CAP) -> ResultRecord:
    """``rec`` ready to write: submissions shared, every string scrubbed and capped."""
    _share_submissions(rec)
    truncated: dict[str, int] = {}
    out: ResultRecord = _walk(rec, "", secrets, cap, truncated)
    if truncated:
        out["truncated"] = truncated
    return out


def _share_submissions(rec: ResultRecord) -> None:
    """Graders whose long submission equals an earlier grader's point at it instead."""
    subs = rec.get("submission")
    if isinstance(subs, dict) and len(subs) > 1 and "submission_same_as" not in rec:
        first: dict[str, str] = {}
        same: dict[str, str] = {}
        for name, text in subs.items():
            if isinstance(text, str) and len(text) >= SHARE_MIN:
                if text in first:
                    same[name] = first[text]
                else:
                    first[text] = name
        if same:
            rec["submission"] = {n: t for n, t in subs.items() if n not in same}
            rec["submission_same_as"] = same


def _walk(value: Any, path: str, secrets: list[str], cap: int, truncated: dict[str, int]) -> Any:
    if isinstance(value, str):
        if not value:
            return value
        text = scrub_with(value, secrets)
        if len(text) > cap:
            truncated[path or "."] = len(text)
            text = text[:cap] + cut_note(len(text))
        return text
    if isinstance(value, dict):
        return {
            (scrub_with(k, secrets) if isinstance(k, str) else k): _walk(
                v, f"{path}.{k}" if path else str(k), secrets, cap, truncated
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_walk(v, f"{path}[{i}]", secrets, cap, truncated) for i, v in enumerate(value)]
    return value


def submission_of(row: ResultRecord, name: str) -> Any:
    """The submission grader ``name`` saw, following ``submission_same_as``; None when absent."""
    subs = row.get("submission") or {}
    if name in subs:
        return subs[name]
    other = (row.get("submission_same_as") or {}).get(name)
    return subs.get(other) if other is not None else None


def submissions_of(row: ResultRecord) -> dict[str, Any]:
    """Every grader's submission of one result line, shared ones expanded."""
    subs = dict(row.get("submission") or {})
    for name, other in (row.get("submission_same_as") or {}).items():
        if other in subs:
            subs[name] = subs[other]
    return subs
