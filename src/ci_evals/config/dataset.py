"""Datasets: JSONL and CSV rows -> :class:`~ci_evals.core.sample.Sample`, strictly validated, streamed.

Every error names the file and line. CSV cells keep their text (ground truth ``4`` stays ``"4"``);
``metadata``, ``agent_args`` and ``rubric_vars`` cells hold JSON objects; an ``input`` cell that
looks like a JSON list is a multi-turn input. Blank JSONL lines are skipped. Columns other than the
known fields are kept in ``Sample.extra_vars`` for templates.

Samples are parsed lazily so a 100k-row dataset never needs 100k objects alive at once.
"""

from __future__ import annotations

import csv
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ci_evals._util.bounds import NOT_READ, loads, quick_loads
from ci_evals._util.errors import ConfigError
from ci_evals._util.text import some_ids
from ci_evals.config.rowerrors import duplicate_id, json_where
from ci_evals.config.yamlio import regular_file
from ci_evals.core.sample import Sample

MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest JSONL line (one sample) we read: parsing costs several times a line's size in memory."""
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


def shard_of(sample_id: int | str, count: int) -> int:
    """Stable 0-based shard of a sample id (crc32 of its text), the same on every machine."""
    return zlib.crc32(str(sample_id).encode("utf-8")) % count


class Lane(Protocol):
    """The selected samples one of several processes runs (ci_evals.run.lanes.Share): asked about
    each in increasing order (from 0 again for the next iteration), until ``done``."""

    done: bool

    def owns(self, ordinal: int) -> bool: ...


_PLAIN_KEYS = frozenset(("id", "input", "ground_truth", "tags", "metadata"))


def _plain_row(row: dict[str, Any], index: int) -> dict[str, Any] | None:
    """A JSONL row's sample fields when the row is the plain kind (id, a string input and ground
    truth, tags, a metadata object with nothing nested to lift), which :meth:`Dataset._fields`
    would accept as it is; None for every other row, which ``_fields`` checks key by key."""
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


class Dataset:
    """A dataset file plus the filters that select which samples run.

    Args:
        path: a .jsonl or .csv file.
        sample_tags: run only samples having any of these tags.
        max_samples: the first N selected samples (0 or None = all).
        shard: (k, n), 1-based k: run only samples whose id hashes to shard k of n.
        sample_ids: run only samples with these ids (each must be in the file).
        id_match: run only samples whose id this predicate accepts (``--sample-pattern``).
    """

    def __init__(
        self,
        path: Path,
        *,
        sample_tags: list[str] | None = None,
        max_samples: int | None = None,
        shard: tuple[int, int] | None = None,
        sample_ids: set[str] | None = None,
        id_match=None,
        needs_ids: bool = False,
    ) -> None:
        self.path = path
        self.needs_ids = needs_ids  # a regression gate pairs samples with the baseline's by 'id'
        self.sample_ids = sample_ids
        self.id_match = id_match
        self.sample_tags = set(sample_tags) if sample_tags else None
        self.max_samples = max_samples or None
        self.shard = shard
        suffix = path.suffix.lower()
        if suffix not in (".jsonl", ".csv"):
            raise ConfigError(
                f"unsupported dataset format '{suffix or path.name}'; use .jsonl or .csv",
                file=str(path),
            )
        if not path.exists():
            raise ConfigError("dataset file not found", file=str(path))
        if path.is_dir():
            raise ConfigError("dataset is a folder, expected a .jsonl or .csv file", file=str(path))
        regular_file(path, "dataset")  # a FIFO or a device would hang or never end
        self.format = suffix[1:]
        self.total = 0  # rows in the file, set by scan()
        self.count = 0  # selected samples, set by scan()
        self.unsharded = 0  # selected samples before the shard is taken, set by scan()
        self.lane: Lane | None = (
            None  # which selected samples an iteration yields (worker processes)
        )
        self._no_id = False  # whether the row parsed last had no 'id'
        self._rubric_files: dict[Path, str] = {}  # rubric_path files, read once each

    # -- parsing -------------------------------------------------------------------------------

    def _err(self, line: int, msg: str) -> ConfigError:
        return ConfigError(msg, file=str(self.path), line=line)

    def _fields(self, line: int, index: int, row: dict[str, Any], from_csv: bool) -> dict[str, Any]:
        """One row checked, as the fields of its :class:`Sample` (built only when a sample is needed:
        validating the file does not build 100k models)."""
        fast = None if from_csv else _plain_row(row, index)
        if fast is not None:
            self._no_id = "id" not in row or row["id"] is None
            return fast

        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise self._err(line, msg)

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
                    raise self._err(
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
                raise self._err(
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
                    raise self._err(
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
                raise self._err(
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
        self._no_id = sid is None  # read by scan() to word a clash of this row's index with an id
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
            raise self._err(line, "give 'rubric' or 'rubric_path', not both")
        if inline is not None and not isinstance(inline, str):
            raise self._err(line, "'rubric' must be a string")
        if path is None:
            return inline
        if not isinstance(path, str):
            raise self._err(line, "'rubric_path' must be a string")
        full = (self.path.parent / Path(path).expanduser()).resolve()
        cache = self._rubric_files
        if full not in cache:
            try:
                cache[full] = full.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise self._err(
                    line, f"rubric_path '{path}' is not UTF-8 text (byte {exc.start})"
                ) from None
            except OSError as exc:
                reason = (
                    "file not found"
                    if isinstance(exc, FileNotFoundError)
                    else exc.strerror or str(exc)
                )
                raise self._err(
                    line, f"cannot read rubric_path '{path}' ({full}): {reason}"
                ) from None
        return cache[full]

    def _jsonl(self, lane: Lane | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every row; with ``lane`` only the rows it owns (every row selected), the others not parsed."""
        index = 0
        with self.path.open("rb") as fh:
            for line_no, raw in enumerate(iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b""), 1):
                if (
                    lane is not None
                    and (raw[:1] == b"{" or raw.lstrip()[:1] == b"{")
                    and not lane.owns(index)
                ):
                    if lane.done:
                        return
                    index += 1  # another process's row, checked by scan(): blank lines and the rest read as below
                    continue
                if len(raw) > MAX_LINE_BYTES and len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
                    raise self._err(
                        line_no,
                        f"line longer than {MAX_LINE_BYTES // 2**20} MiB, the limit for one "
                        "sample (keep large content in files the target reads)",
                    )
                row = quick_loads(raw)  # valid UTF-8 JSON, read as below would read it
                if (
                    row is NOT_READ
                ):  # anything else: checked step by step, so the error names what is wrong
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise self._err(line_no, f"not UTF-8 text (byte {exc.start})") from None
                    if not text.strip():
                        continue
                    try:
                        row = loads(text.rstrip("\r\n"))  # so an error at the end is in this line
                    except ValueError as exc:  # one position: the file's line, the column in it
                        raise self._err(
                            line_no, "invalid JSON" + json_where(exc, "column")
                        ) from None
                if not isinstance(row, dict):
                    raise self._err(
                        line_no, f"each line must be a JSON object, got {type(row).__name__}"
                    )
                yield line_no, self._fields(line_no, index, row, from_csv=False)
                index += 1

    def _csv(self) -> Iterator[tuple[int, dict[str, Any]]]:
        # Cells as long as a JSONL line may be; "utf-8-sig" drops the BOM Excel's "CSV UTF-8" writes.
        csv.field_size_limit(max(csv.field_size_limit(), MAX_LINE_BYTES))
        try:
            fh = self.path.open(newline="", encoding="utf-8-sig")
            with fh:
                reader = csv.DictReader(fh)
                header = reader.fieldnames
                if not header:
                    raise self._err(1, "CSV file is empty (no header row)")
                if "input" not in header and "prompt" not in header:
                    cols = [c if len(c) <= 40 else c[:37] + "..." for c in header[:10]]
                    if len(header) > 10:
                        cols.append(f"... {len(header) - 10} more")
                    raise self._err(1, f"missing required column 'input'. Found columns: {cols}")
                for index, row in enumerate(reader):
                    if None in row:
                        raise self._err(
                            reader.line_num,
                            f"row has {len(header) + len(row[None])} cells, header has {len(header)}",
                        )
                    yield reader.line_num, self._fields(reader.line_num, index, row, from_csv=True)
        except UnicodeDecodeError as exc:
            raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=str(self.path)) from None
        except csv.Error as exc:
            raise ConfigError(f"malformed CSV: {exc}", file=str(self.path)) from None

    def _rows(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every row of the file as (line, its sample's fields), unfiltered."""
        return self._jsonl() if self.format == "jsonl" else self._csv()

    def rows(self) -> Iterator[tuple[int, Sample]]:
        """Every row of the file as (line, Sample), unfiltered."""
        for line, fields in self._rows():
            yield line, Sample(**fields)

    # -- selection -----------------------------------------------------------------------------

    def _selected(self, rows=None) -> Iterator[tuple[int, dict[str, Any]]]:
        """Apply tags, then max_samples, then the shard. Reads on past max_samples only when
        validating (``rows`` given), so every row of the file is still checked."""
        taken = 0
        lane, ordinal = (
            (self.lane if rows is None else None),
            -1,
        )  # worker processes (ci_evals.run.lanes)
        source = rows if rows is not None else self._rows()
        if (
            lane is not None
            and self.format == "jsonl"
            and self.shard is None
            and self.max_samples is None
            and self.sample_ids is None
            and self.id_match is None
            and self.sample_tags is None
        ):
            source, lane = (
                self._jsonl(lane),
                None,
            )  # every row is selected: the other lanes' rows are not parsed
        for line, fields in source:
            sid = fields["id"]
            if self.sample_ids is not None and str(sid) not in self.sample_ids:
                continue
            if self.id_match is not None and not self.id_match(str(sid)):
                continue
            if self.sample_tags is not None and not self.sample_tags.intersection(fields["tags"]):
                continue
            if self.max_samples is not None and taken >= self.max_samples:
                if rows is None:
                    return
                continue
            taken += 1
            if rows is not None:
                self.unsharded = (
                    taken  # samples selected before sharding: merge checks shards add up
                )
            if self.shard is not None and shard_of(sid, self.shard[1]) != self.shard[0] - 1:
                continue
            if lane is not None:
                ordinal += 1
                if not lane.owns(ordinal):
                    if lane.done:
                        return
                    continue
            yield line, fields

    def scan(self, on_sample=None) -> int:
        """Validate the whole file in one pass: parse every row, reject duplicate ids, count the selection.

        ``on_sample(sample)`` is called for each selected sample (pre-run checks such as
        rubric_vars). Returns the number of selected samples.
        """
        seen: dict[str, int] = {}  # id -> its first line, negated when that row had no 'id'
        state = {"total": 0}

        def checked_rows():
            for line, fields in self._rows():
                state["total"] += 1
                if self.needs_ids and self._no_id:
                    raise self._err(
                        line,
                        "this row has no 'id', and a regression gate (max_drop, max_regressions) "
                        "pairs each sample with the baseline's by its id: give every row one",
                    )
                sid = fields["id"]
                first = seen.setdefault(str(sid), -line if self._no_id else line)
                if abs(first) != line:
                    raise self._err(line, duplicate_id(sid, self._no_id, abs(first), first < 0))
                yield line, fields

        count = 0
        for _, fields in self._selected(checked_rows()):
            if on_sample is not None:
                on_sample(Sample(**fields))
            count += 1
        if state["total"] == 0:
            raise ConfigError("dataset is empty", file=str(self.path))
        self.total = state["total"]
        if self.sample_ids is not None and self.sample_ids - seen.keys():
            absent = self.sample_ids - seen.keys()
            raise ConfigError(
                f"no sample with id {some_ids(absent)} in this dataset", file=str(self.path)
            )
        if self.id_match is not None and count == 0 and not any(self.id_match(k) for k in seen):
            pattern = str(getattr(self.id_match, "pattern", ""))[:80]
            raise ConfigError(
                f"no sample id matches --sample-pattern {pattern!r}", file=str(self.path)
            )
        if (
            count == 0 and self.shard is None
        ):  # an empty shard is fine: its part of the work is nothing
            why = f" with any of the tags {sorted(self.sample_tags)}" if self.sample_tags else ""
            raise ConfigError(f"no sample selected{why}", file=str(self.path))
        self.count = count
        return count

    def __iter__(self) -> Iterator[Sample]:
        for _, fields in self._selected():
            yield Sample(**fields)
