"""The data inside report.html: result lines as the page's script reads them, within its limits.

Each text field is cut at a character cap (the page shows the cut and the full length), and the cap
shrinks until the data fits :data:`MAX_DATA_BYTES`. Beyond :data:`MAX_ROWS` result lines (or when
even the smallest cut does not fit), the page keeps every failing, errored and regressed line plus a
seeded random sample of the others, and says so. Memory stays near the byte budget: rows are built
one at a time and a pass stops as soon as it cannot fit. How one line becomes a row (its table part
and its detail): :mod:`ci_evals.reports.report_rows`.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from typing_extensions import TypedDict

from ci_evals.gating.comparison import Comparison, row_key
from ci_evals.reports.report_rows import Cut, page_row
from ci_evals.results.files import Trust, iter_records
from ci_evals.results.records import ResultRecord, Summary

MAX_ROWS = 20_000
MAX_DATA_BYTES = 20_000_000
TEXT_CAP = 8_000
MIN_TEXT_CAP = 200
BUCKETS = 10
_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


class ErrorGroup(TypedDict):
    """One distinct error message of the run and how many lines (or grades) had it."""

    category: str
    grader: str | None
    message: str
    count: int


class PageFacts(TypedDict, total=False):
    """What report.html shows about its data besides the rows: counts, what was kept, the cut."""

    total: int
    failing: list[int]
    others: list[int]
    models: list[str]
    hist: dict[str, list[int]]
    groups: list[ErrorGroup]
    text_cap: int
    shown: int
    limit: int
    failing_total: int
    failing_shown: int
    others_total: int


_ENCODE = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=str
).encode  # json.dumps(**kw) builds one per call


def script_json(data: Any) -> str:
    """JSON that cannot end its ``<script>`` element or start markup: ``< > &`` and U+2028/9 escaped.

    orjson writes the same compact text as ``json`` at a fifth of the cost (two calls per result
    line: a fifth of the reports' time at 20,000 lines); ``json`` writes what orjson refuses (an
    integer over 64 bits, a lone surrogate, a key that is not a string). Floats may differ in form
    only (``1e-7`` for ``1e-07``)."""
    try:
        text = orjson.dumps(data, default=str).decode("utf-8")
    except TypeError:  # orjson.JSONEncodeError included
        text = _ENCODE(data)
    for char, escape in _JSON_ESCAPES.items():  # str.replace runs in C: far faster than translate
        if char in text:
            text = text.replace(char, escape)
    return text


def _line_count(results: Path) -> int:
    if not results.exists():
        return 0
    with results.open("rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


class Scan:
    """The first pass over results.jsonl, fed one line at a time (:meth:`add`) so the reports can
    share one read: counts, histograms, error groups, which line numbers the page keeps, and (while
    every line still fits the limits, the usual case) the rows themselves, so no second pass is needed.

    ``results`` is the file being read (its line count says up front whether every row can fit),
    ``comparison`` the run's with its baseline (the baseline's grades the page shows beside this
    run's, the samples that regressed), None without one.
    """

    def __init__(
        self,
        results: Path,
        comparison: Comparison | None = None,
        *,
        max_rows: int = MAX_ROWS,
        max_bytes: int = MAX_DATA_BYTES,
        trust: Trust = Trust.OWN,
    ) -> None:
        self.results, self.max_rows, self.max_bytes, self.trust = (
            Path(results),
            max_rows,
            max_bytes,
            trust,
        )
        self.comparison = comparison
        self.total = 0
        self.keep: list[int] = []
        self.others: list[int] = []
        # No point building every row now when some lines will be left out.
        self.tables: list[str] | None = [] if _line_count(self.results) <= max_rows else None
        self.details: list[str] = []
        self.size = 0
        self.hist: dict[str, list[int]] = {}
        self.groups: Counter[tuple[str, str | None, str]] = Counter()
        self.models: set[str] = set()
        self._rng = random.Random(0)
        self._cut = Cut(TEXT_CAP)

    def feed(self) -> Scan:
        """Read the whole of ``results`` (at the scan's trust) into the scan; returns it."""
        for i, rec in iter_records(self.results, self.trust):
            self.add(i, rec)
        return self

    def add(self, i: int, rec: ResultRecord) -> None:
        """Line ``i`` of results.jsonl."""
        self.total += 1
        total = self.total
        if rec.get("model"):
            self.models.add(str(rec["model"]))
        grades = rec.get("grades") or {}
        err = rec.get("error")
        row_errored = False
        if isinstance(err, dict):
            row_errored = True
            self.groups[(err.get("category") or "target", None, str(err.get("message"))[:500])] += 1
        failing = bool(err)
        hist = self.hist
        for name, g in grades.items():
            g_err = g.get("error")
            score = g.get("score")
            if g_err is None and isinstance(score, int | float):
                b = min(max(int(float(score) * BUCKETS), 0), BUCKETS - 1)
                if name not in hist:
                    hist[name] = [0] * BUCKETS
                hist[name][b] += 1
            elif g_err and not row_errored:
                self.groups[(g.get("error_category") or "grading", name, str(g_err)[:500])] += 1
            if not g.get("passed"):
                failing = True
        if self.tables is not None:
            table, detail = page_row(rec, self._cut, self.comparison)
            t, d = script_json(table), script_json(detail)
            self.tables.append(t)
            self.details.append(d)
            self.size += (
                (len(t) if t.isascii() else len(t.encode("utf-8")))
                + (len(d) if d.isascii() else len(d.encode("utf-8")))
                + 2
            )
            if self.size > self.max_bytes or total > self.max_rows:
                self.tables, self.details = None, []
        if failing or (
            self.comparison is not None
            and self.comparison.regressed
            and self.comparison.regressed_on(row_key(rec))
        ):
            self.keep.append(i)
        elif len(self.others) < self.max_rows:  # reservoir sample of the passing lines
            self.others.append(i)
        else:
            j = self._rng.randrange(total)
            if j < self.max_rows:
                self.others[j] = i

    def result(self) -> PageFacts:
        """What the scan counted (the rows it holds, if any, are its ``tables`` and ``details``)."""
        return {
            "total": self.total,
            "failing": self.keep,
            "others": self.others,
            "models": sorted(self.models),
            "hist": self.hist,
            "groups": [
                {"category": c, "grader": g, "message": m, "count": n}
                for (c, g, m), n in self.groups.most_common()
            ],
        }


def _choose(scan: PageFacts, limit: int) -> set[int]:
    """At most ``limit`` line numbers: the failing ones first, then a seeded sample of the others."""
    rng = random.Random(1)
    failing, others = scan["failing"], scan["others"]
    if len(failing) >= limit:
        return set(rng.sample(failing, limit))
    room = limit - len(failing)
    return set(failing) | set(rng.sample(others, room) if len(others) > room else others)


def _rows_json(
    results: Path,
    keep: set[int],
    cut: Cut,
    comparison: Comparison | None,
    max_bytes: int | None,
    trust: Trust,
) -> tuple[list[str], list[str], int]:
    """The kept rows as JSON texts (table part, detail part) and their size; stops early (returning
    the projected size) once they cannot fit ``max_bytes``, so memory stays near ``max_bytes``."""
    tables: list[str] = []
    details: list[str] = []
    size = 0
    for _, rec in iter_records(results, trust, keep):
        table, detail = page_row(rec, cut, comparison)
        tables.append(script_json(table))
        details.append(script_json(detail))
        size += len(tables[-1].encode("utf-8")) + len(details[-1].encode("utf-8")) + 2
        if max_bytes is not None and size > max_bytes:
            return [], [], int(size * len(keep) / len(tables))
    return tables, details, size


def build_data(
    summary: Summary,
    results: Path,
    comparison: Comparison | None = None,
    *,
    max_rows: int = MAX_ROWS,
    max_bytes: int = MAX_DATA_BYTES,
    trust: Trust = Trust.OWN,
    scan: Scan | None = None,
) -> tuple[str, str, PageFacts]:
    """(the page's data and the rows' details as script-safe JSON, facts for the template), cutting
    texts to fit ``max_bytes``; ``results`` is read at ``trust`` (see ci_evals.results.files);
    ``comparison``: the run's with its baseline (None: no baseline columns, nothing regressed).
    ``scan``: the first pass, already fed (its own results, comparison and limits then apply)."""
    if scan is None:
        scan = Scan(results, comparison, max_rows=max_rows, max_bytes=max_bytes, trust=trust).feed()
    results, max_rows, max_bytes, trust = scan.results, scan.max_rows, scan.max_bytes, scan.trust
    comparison = scan.comparison
    eager = (scan.tables, scan.details, scan.size) if scan.tables is not None else None
    facts = scan.result()
    metrics = summary.get("metrics") or {}
    names = list(metrics) or sorted(facts["hist"])
    limit = max_rows
    keep = _choose(facts, limit)
    cap = TEXT_CAP
    if eager is not None:
        rows, details, size = eager
    while eager is None:
        cut = Cut(cap)
        rows, details, size = _rows_json(
            results, keep, cut, comparison, max_bytes if len(keep) > 1 else None, trust
        )
        if size <= max_bytes or len(keep) <= 1:
            break
        smaller = max(MIN_TEXT_CAP, int(cap * max_bytes / size * 0.9))
        if smaller < cap and smaller < cut.longest:  # first cut the texts (where that helps) ...
            cap = smaller
        else:  # ... then hold fewer lines
            limit = max(1, min(len(keep) - 1, int(len(keep) * max_bytes / size * 0.9)))
            keep = _choose(facts, limit)
    head = script_json(
        {
            "metrics": [
                {"key": k, "label": (metrics.get(k) or {}).get("label") or k} for k in names
            ],
            "total_rows": facts["total"],
            "has_baseline": comparison is not None and bool(comparison.grades),
            "text_cap": cap,
        }
    )
    n_fail = len(facts["failing"])
    facts["text_cap"], facts["shown"], facts["limit"] = cap, len(rows), limit
    facts["failing_total"], facts["failing_shown"] = n_fail, min(n_fail, len(rows))
    facts["others_total"] = facts["total"] - n_fail
    return head[:-1] + ',"rows":[' + ",".join(rows) + "]}", "[" + ",".join(details) + "]", facts
