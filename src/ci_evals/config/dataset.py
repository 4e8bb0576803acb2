"""Datasets: JSONL and CSV files -> :class:`~ci_evals.core.sample.Sample`, strictly validated, streamed.

Every error names the file and line. Each row is checked by :mod:`ci_evals.config.rows` (what a
row may hold); this module reads the file (blank JSONL lines are skipped, a line longer than
:data:`MAX_LINE_BYTES` is refused), rejects duplicate ids, and selects the samples that run (tags,
``max_samples``, the shard, ids, a worker's lane).

Samples are parsed lazily so a 100k-row dataset never needs 100k objects alive at once.
"""

from __future__ import annotations

import csv
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, TypedDict

from ci_evals._util.bounds import NOT_READ, loads, quick_loads
from ci_evals._util.errors import ConfigError
from ci_evals._util.text import some_ids
from ci_evals.config.rowerrors import duplicate_id, json_where
from ci_evals.config.rows import RowChecker, SampleFields
from ci_evals.config.yamlio import regular_file
from ci_evals.core.sample import Sample

MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest JSONL line (one sample) we read: parsing costs several times a line's size in memory."""


def shard_of(sample_id: int | str, count: int) -> int:
    """Stable 0-based shard of a sample id (crc32 of its text), the same on every machine."""
    return zlib.crc32(str(sample_id).encode("utf-8")) % count


class Lane(Protocol):
    """The selected samples one of several processes runs (ci_evals.run.lanes.Share): asked about
    each in increasing order (from 0 again for the next iteration), until ``done``."""

    done: bool

    def owns(self, ordinal: int) -> bool: ...


class Selection(TypedDict):
    """Which samples of a dataset run: the keyword arguments of :class:`Dataset` (read there)."""

    sample_tags: list[str] | None
    max_samples: int | None
    shard: tuple[int, int] | None
    sample_ids: set[str] | None
    id_match: Callable[[str], bool] | None
    needs_ids: bool


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
        id_match: Callable[[str], bool] | None = None,
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
        self._check = RowChecker(path)  # each row as its sample's fields

    @property
    def rubric_files(self) -> list[Path]:
        """The ``rubric_path`` files the rows read so far named: what decides their grades besides
        the file itself (a ``--resume`` refuses a folder whose files changed)."""
        return self._check.rubric_files

    # -- reading -------------------------------------------------------------------------------

    def _err(self, line: int, msg: str) -> ConfigError:
        return self._check.error(line, msg)

    def _jsonl(self, lane: Lane | None = None) -> Iterator[tuple[int, SampleFields]]:
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
                yield line_no, self._check.fields(line_no, index, row, from_csv=False)
                index += 1

    def _csv(self) -> Iterator[tuple[int, SampleFields]]:
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
                    yield (
                        reader.line_num,
                        self._check.fields(reader.line_num, index, row, from_csv=True),
                    )
        except UnicodeDecodeError as exc:
            raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=str(self.path)) from None
        except csv.Error as exc:
            raise ConfigError(f"malformed CSV: {exc}", file=str(self.path)) from None

    def _rows(self) -> Iterator[tuple[int, SampleFields]]:
        """Every row of the file as (line, its sample's fields), unfiltered."""
        return self._jsonl() if self.format == "jsonl" else self._csv()

    def rows(self) -> Iterator[tuple[int, Sample]]:
        """Every row of the file as (line, Sample), unfiltered."""
        for line, fields in self._rows():
            yield line, Sample(**fields)

    # -- selection -----------------------------------------------------------------------------

    def _selected(
        self, rows: Iterator[tuple[int, SampleFields]] | None = None
    ) -> Iterator[tuple[int, SampleFields]]:
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

    def scan(self, on_sample: Callable[[Sample], object] | None = None) -> int:
        """Validate the whole file in one pass: parse every row, reject duplicate ids, count the selection.

        ``on_sample(sample)`` is called for each selected sample (pre-run checks such as
        rubric_vars). Returns the number of selected samples.
        """
        seen: dict[str, int] = {}  # id -> its first line, negated when that row had no 'id'
        state = {"total": 0}

        def checked_rows() -> Iterator[tuple[int, SampleFields]]:
            for line, fields in self._rows():
                state["total"] += 1
                if self.needs_ids and self._check.no_id:
                    raise self._err(
                        line,
                        "this row has no 'id', and a regression gate (max_drop, max_regressions) "
                        "pairs each sample with the baseline's by its id: give every row one",
                    )
                sid = fields["id"]
                first = seen.setdefault(str(sid), -line if self._check.no_id else line)
                if abs(first) != line:
                    raise self._err(
                        line, duplicate_id(sid, self._check.no_id, abs(first), first < 0)
                    )
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
