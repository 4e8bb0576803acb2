"""A dataset row checked, as the fields of its :class:`~ci_evals.core.sample.Sample`.

One row at a time, from a JSONL object or a CSV row (:mod:`ci_evals.config.dataset` reads the
file and selects the samples): every error names the file and line. CSV cells keep their text
(ground truth ``4`` stays ``"4"``); ``metadata``, ``agent_args`` and ``rubric_vars`` cells hold
JSON objects; an ``input`` cell that looks like a JSON list is a multi-turn input. Columns other
than the known fields are kept in ``extra_vars`` for templates. letta-evals rows (``sample_id``,
``prompt``, ``extra_vars``, objects nested in ``metadata``) read as their ci-evals spelling.

The fields are a plain dict, not a model: validating a file does not build 100k samples.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

from ci_evals._util.bounds import loads
from ci_evals._util.errors import ConfigError
from ci_evals.config.rowerrors import json_where

KNOWN = (
    "id",
    "input",
    "ground_truth",
    "metadata",
    "tags",
    "agent_args",
    "rubric_vars",
    "rubric",
    "rubric_path",
)


LETTA_KEYS = ("sample_id", "prompt", "extra_vars")  # letta-evals 0.6-0.17 row keys, read in _sample
NESTED = (
    "agent_args",
    "rubric_vars",
    "extra_vars",
)  # letta-evals 0.14+: these objects may sit in `metadata`


class SampleFields(TypedDict):
    """The keyword arguments of one row's :class:`~ci_evals.core.sample.Sample`."""

    id: int | str
    input: str | list[str]
    ground_truth: str | list[str] | None
    metadata: dict[str, Any]
    tags: list[str]
    agent_args: dict[str, Any] | None
    rubric_vars: dict[str, Any] | None
    extra_vars: dict[str, Any]
    rubric: str | None


_PLAIN_KEYS = frozenset(("id", "input", "ground_truth", "tags", "metadata"))


def _plain_row(row: dict[str, Any], index: int) -> SampleFields | None:
    """A JSONL row's sample fields when the row is the plain kind (id, a string input and ground
    truth, tags, a metadata object with nothing nested to lift), which :meth:`RowChecker.fields`
    would accept as it is; None for every other row, which ``fields`` checks key by key."""
    if not row.keys() <= _PLAIN_KEYS:
        return None
    sid, inp, gt = row.get("id"), row.get("input"), row.get("ground_truth")
    if inp.__class__ is not str or not (gt is None or gt.__class__ is str):
        return None
    if sid is None:
        sid = index
    elif not (sid.__class__ is int or sid.__class__ is str):
        return None
    tags = row.get("tags") or []
    if tags.__class__ is not list or (
        tags and not all(t.__class__ is str for t in tags)
    ):  # no generator for []
        return None
    meta = row.get("metadata")
    if meta is not None and (meta.__class__ is not dict or any(k in meta for k in NESTED)):
        return None
    return {
        "id": sid,
        "input": inp,
        "ground_truth": gt,
        "metadata": meta or {},
        "tags": tags,
        "agent_args": None,
        "rubric_vars": None,
        "extra_vars": {},
        "rubric": None,
    }


class RowChecker:
    """The rows of the dataset file at ``path``, checked one by one (with the ``rubric_path`` files
    they name, read once each)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.no_id = False
        """Whether the row checked last had no 'id' (its id is its row index)."""
        self._files: dict[Path, str] = {}  # rubric_path files, read once each

    @property
    def rubric_files(self) -> list[Path]:
        """The ``rubric_path`` files the rows checked so far named (read once each)."""
        return list(self._files)

    def error(self, line: int, msg: str) -> ConfigError:
        return ConfigError(msg, file=str(self.path), line=line)

    def fields(self, line: int, index: int, row: dict[str, Any], from_csv: bool) -> SampleFields:
        """One row checked, as the fields of its :class:`Sample` (built only when a sample is needed:
        validating the file does not build 100k models)."""
        fast = None if from_csv else _plain_row(row, index)
        if fast is not None:
            self.no_id = "id" not in row or row["id"] is None
            return fast

        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise self.error(line, msg)

        if row.get("input") in (None, "") and row.get("prompt") not in (None, ""):
            row = {
                **row,
                "input": row["prompt"],
            }  # letta-evals 0.14+: `prompt` is an alias of `input`
        meta = row.get("metadata")
        if isinstance(meta, dict):
            row = {**{k: meta[k] for k in NESTED if isinstance(meta.get(k), dict)}, **row}
        need("input" in row, "missing required field 'input'")
        inp = row["input"]
        if from_csv:
            text = inp.strip()
            if text.startswith("[") and text.endswith("]"):
                try:
                    inp = loads(text)
                except ValueError as exc:
                    raise self.error(
                        line,
                        "'input' looks like a JSON list but is invalid"
                        + json_where(exc, "character"),
                    ) from None
        if isinstance(inp, list):
            need(
                bool(inp) and all(isinstance(x, str) for x in inp),
                "'input' must be a string or a non-empty list of strings",
            )
        else:
            need(
                isinstance(inp, str),
                f"'input' must be a string or a list of strings, got {type(inp).__name__}",
            )

        gt = row.get("ground_truth")
        if from_csv and gt == "":
            gt = None
        if (
            from_csv
            and isinstance(gt, str)
            and gt.strip().startswith("[")
            and gt.strip().endswith("]")
        ):
            try:
                gt = json.loads(gt)
            except ValueError as exc:
                raise self.error(
                    line, f"'ground_truth' looks like a JSON list but is invalid: {exc}"
                ) from None
        if isinstance(
            gt, list
        ):  # letta-evals 0.9+: one ground truth per input turn, each turn graded
            need(
                all(isinstance(x, str) for x in gt),
                "'ground_truth' list must hold strings, one per input turn",
            )
            need(
                isinstance(inp, list) and len(inp) == len(gt),
                f"'ground_truth' is a list of {len(gt)}: 'input' must be a list of as many turns"
                + (f" (it has {len(inp)})" if isinstance(inp, list) else " (it is a string)"),
            )
        elif isinstance(gt, bool):
            gt = "true" if gt else "false"
        elif isinstance(gt, (int, float)):
            gt = json.dumps(gt)
        need(
            gt is None or isinstance(gt, (str, list)),
            "'ground_truth' must be a string (or a number)",
        )

        def obj(name: str) -> dict[str, Any] | None:
            value = row.get(name)
            if from_csv:
                if value in (None, ""):
                    return None
                try:
                    value = loads(value)
                except ValueError as exc:
                    raise self.error(
                        line, f"'{name}' cell is not valid JSON" + json_where(exc, "character")
                    ) from None
            need(value is None or isinstance(value, dict), f"'{name}' must be a JSON object")
            return value

        tags = row.get("tags")
        if from_csv and isinstance(tags, str):
            t = tags.strip()
            try:
                tags = (
                    loads(t)
                    if t.startswith("[")
                    else [x.strip() for x in t.split(",") if x.strip()]
                )
            except ValueError as exc:
                raise self.error(
                    line, f"'tags' cell looks like a JSON list but is invalid: {exc}"
                ) from None
        tags = tags or []
        need(
            isinstance(tags, list) and all(isinstance(x, str) for x in tags),
            "'tags' must be a list of strings",
        )

        sid = row.get("sample_id") if row.get("sample_id") not in (None, "") else row.get("id")
        if from_csv and isinstance(sid, str):
            sid = sid.strip()
            sid = int(sid) if sid.isdigit() and str(int(sid)) == sid else (sid or None)
        self.no_id = sid is None  # read by scan() to word a clash of this row's index with an id
        if sid is None:
            sid = index
        need(
            isinstance(sid, (int, str)) and not isinstance(sid, bool),
            "'id' must be a string or an integer",
        )

        extra = {k: v for k, v in row.items() if k not in KNOWN and k is not None}
        for k in LETTA_KEYS:
            extra.pop(k, None)
        extra.update(obj("extra_vars") or {})  # letta-evals 0.6+: the row's `extra_vars` object
        return {
            "id": sid,
            "input": inp,
            "ground_truth": gt,
            "metadata": obj("metadata") or {},
            "tags": tags,
            "agent_args": obj("agent_args"),
            "rubric_vars": obj("rubric_vars"),
            "extra_vars": extra,
            "rubric": self._rubric(line, row, from_csv),
        }

    def _rubric(self, line: int, row: dict[str, Any], from_csv: bool) -> str | None:
        """The row's own rubric: ``rubric`` inline, or ``rubric_path`` relative to this dataset file."""
        inline, path = row.get("rubric"), row.get("rubric_path")
        if from_csv:
            inline, path = inline or None, (path or "").strip() or None
        if inline is not None and path is not None:
            raise self.error(line, "give 'rubric' or 'rubric_path', not both")
        if inline is not None and not isinstance(inline, str):
            raise self.error(line, "'rubric' must be a string")
        if path is None:
            return inline
        if not isinstance(path, str):
            raise self.error(line, "'rubric_path' must be a string")
        full = (self.path.parent / Path(path).expanduser()).resolve()
        cache = self._files
        if full not in cache:
            try:
                cache[full] = full.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise self.error(
                    line, f"rubric_path '{path}' is not UTF-8 text (byte {exc.start})"
                ) from None
            except OSError as exc:
                reason = (
                    "file not found"
                    if isinstance(exc, FileNotFoundError)
                    else exc.strerror or str(exc)
                )
                raise self.error(
                    line, f"cannot read rubric_path '{path}' ({full}): {reason}"
                ) from None
        return cache[full]
