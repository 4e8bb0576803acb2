"""The data inside report.html: result lines as the page's script reads them, within its limits.

Each text field is cut at a character cap (the page shows the cut and the full length), and the cap
shrinks until the data fits :data:`MAX_DATA_BYTES`. Beyond :data:`MAX_ROWS` result lines (or when
even the smallest cut does not fit), the page keeps every failing, errored and regressed line plus a
seeded random sample of the others, and says so. Memory stays near the byte budget: rows are built
one at a time and a pass stops as soon as it cannot fit.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from ci_evals.results.files import Trust, iter_records, records
from ci_evals.results.line import submissions_of

MAX_ROWS = 20_000
MAX_DATA_BYTES = 20_000_000
TEXT_CAP = 8_000
MIN_TEXT_CAP = 200
BASELINE_RATIONALE_CAP = 1_000
BUCKETS = 10
_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


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


def _cap(value: Any, limit: int) -> Any:
    """Text cut to ``limit`` characters as ``{"text", "length"}``; other values as text; None stays."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else {"text": text[:limit], "length": len(text)}


class _Cut:
    """``_cap`` at one limit, remembering the longest text it saw (whether a smaller limit would help)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.longest = 0

    def __call__(self, value: Any) -> Any:
        if value.__class__ is str and len(value) <= self.limit:  # the usual text: kept whole
            if len(value) > self.longest:
                self.longest = len(value)
            return value
        if value is None:
            return None
        out = _cap(value, self.limit)
        if isinstance(out, dict):
            self.longest = max(self.longest, out["length"])
        elif isinstance(out, str):
            self.longest = max(self.longest, len(out))
        return out


def _compact(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without its empty entries (None, "", [], {}, False): the page reads a missing key as empty."""
    return {k: v for k, v in d.items() if v or (v is not False and v == 0)}


def _line_count(results: Path) -> int:
    if not results.exists():
        return 0
    with results.open("rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def row_key(rec: dict[str, Any]) -> tuple:
    """(model, sample id, run): what tells result lines apart."""
    return rec.get("model"), str(rec.get("sample_id")), rec.get("run") or 0


def _hits(holder: Any) -> int:
    """LLM calls answered from the cache, as a record (its target) or a grade's metadata counts them."""
    n = holder.get("cache_hits") if isinstance(holder, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


class _Baseline:
    """The baseline folder's grades per (model, sample, run), for the side-by-side columns."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.grades: dict[tuple, dict[str, Any]] = {}
        if folder is None:
            return
        for rec in records(folder / "results.jsonl", Trust.OTHER, what="baseline results.jsonl"):
            self.grades[row_key(rec)] = {
                name: _compact(
                    {
                        "score": g.get("score"),
                        "passed": bool(g.get("passed")),
                        "error": _cap(g.get("error"), BASELINE_RATIONALE_CAP),
                        "rationale": _cap(g.get("rationale"), BASELINE_RATIONALE_CAP),
                    }
                )
                for name, g in (rec.get("grades") or {}).items()
            }

    def of(self, key: tuple) -> dict[str, Any] | None:
        """The same sample's grades: same model and run, else its first run, else a model-less baseline."""
        if not self.grades:
            return None
        model, sid, run = key
        for k in (key, (model, sid, 0), (None, sid, run), (None, sid, 0)):
            if k in self.grades:
                return self.grades[k]
        return None

    def regressed(self, key: tuple, grades: dict[str, Any]) -> list[str]:
        if not self.grades:
            return []
        old = self.of(key) or {}
        return [
            n
            for n, g in grades.items()
            if n in old and old[n].get("passed") and not g.get("passed")
        ]


def _regression_index(summary: dict[str, Any]) -> dict[tuple, set[str]]:
    """summary.json's baseline regressions: (model, sample id) -> the metrics that regressed."""
    index: dict[tuple, set[str]] = {}
    for i in (summary.get("baseline") or {}).get("regressions") or []:
        if isinstance(i, dict):
            index.setdefault((i.get("model"), str(i.get("sample_id"))), set()).add(
                str(i.get("metric"))
            )
    return index


def _row(
    rec: dict[str, Any], cut: _Cut, base: _Baseline, regs: dict[tuple, set[str]]
) -> tuple[dict, dict]:
    """One result line as the page reads it: (what the table needs, the texts for the detail and
    search, which the page parses only on first use). Every text is capped; empty entries are left out."""
    key = row_key(rec)
    grades_in = rec.get("grades") or {}
    subs = submissions_of(
        rec
    )  # a submission several graders saw is stored once (submission_same_as)
    # A text said twice is stored once: {"ref": grader} for a shared submission or the final reply,
    # {"input": i} for a user message that repeats the sample's input.
    first: dict[str, str] = {}
    for name in grades_in:
        text = subs.get(name)
        if isinstance(text, str) and text:
            first.setdefault(text, name)
    target = rec.get("target")
    target_hits = _hits(rec)
    costs = [
        (target or {}).get("cost_usd")
    ]  # summed in this order: the target's, then each grader's
    hits = target_hits
    flags, texts = {}, {}
    for (
        name,
        g,
    ) in grades_in.items():  # _compact's rule written out for the flags: every grade shown
        meta = g.get("metadata")
        flag = {}
        score = g.get("score")
        if score or (score is not False and score == 0):
            flag["score"] = score
        if g.get("passed"):
            flag["passed"] = True
        if g.get("error"):
            flag["error"] = True
        grade_hits = _hits(meta)
        if grade_hits:
            flag["cached"] = grade_hits
            hits += grade_hits
        flags[name] = flag
        if meta:
            costs.append(meta.get("cost_usd"))
        entry = {}  # _compact's rule written out (a cut text is kept when not empty): four times a line
        if value := cut(g.get("error")):
            entry["error"] = value
        value = g.get("error_category")
        if value or (value is not False and value == 0):
            entry["category"] = value
        if value := cut(g.get("rationale")):
            entry["rationale"] = value
        text = subs.get(name)
        if isinstance(text, str) and first.get(text, name) != name:
            entry["submission"] = {"ref": first[text]}
        elif text is not None and (text := cut(text)):
            entry["submission"] = text
        if meta and (meta := cut(meta)):
            entry["metadata"] = meta
        if entry:
            texts[name] = entry
    costs = [c for c in costs if isinstance(c, int | float)]
    regressed = (
        (regs.get(key[:2], set()) | set(base.regressed(key, grades_in)))
        if regs or base.grades
        else ()
    )
    old = base.of(key)
    inp = rec.get("input")
    inputs = {
        t: i
        for i, t in enumerate(inp if isinstance(inp, list) else [inp])
        if isinstance(t, str) and t
    }
    traj = rec.get("trajectory") or {}
    err = rec.get("error")
    usage = rec.get("usage") or {}
    table = _compact(
        {
            "id": key[1],
            "model": key[0],
            "run": key[2],
            "tags": [str(t) for t in rec.get("tags") or []],
            "grades": flags,
            "regressed": sorted(regressed),
            "baseline": {
                n: _compact(
                    {
                        "score": b.get("score"),
                        "passed": b.get("passed"),
                        "error": bool(b.get("error")),
                    }
                )
                for n, b in old.items()
            }
            if old
            else None,
            "error": ({"category": err.get("category")} if isinstance(err, dict) else True)
            if err
            else None,
            "tokens": int(usage.get("prompt_tokens") or 0)
            + int(usage.get("completion_tokens") or 0),
            "cached": hits or None,
            "target_cached": target_hits or None,
            "cost": sum(costs) if costs else None,
            "duration": rec.get("duration_s"),
        }
    )
    detail = _compact(
        {
            "input": [cut(t) for t in inp] if isinstance(inp, list) else cut(inp),
            "ground_truth": cut(rec.get("ground_truth")),
            "error": {"category": err.get("category"), "message": cut(err.get("message"))}
            if isinstance(err, dict)
            else cut(err),
            "grades": texts,
            "baseline": old,
            "usage": _compact(usage),
            "target": cut(target),
            "turns": [
                [_message(m, cut, first, inputs) for m in turn] for turn in traj.get("turns") or []
            ],
            "memory": {str(k): cut(v) for k, v in (traj.get("memory_blocks") or {}).items()},
        }
    )
    return table, detail


def _message(
    m: dict[str, Any], cut: _Cut, submissions: dict[str, str], inputs: dict[str, int]
) -> dict[str, Any]:
    content = m.get("content")
    if isinstance(content, str) and content in submissions:
        text: Any = {"ref": submissions[content]}
    elif isinstance(content, str) and m.get("role") == "user" and content in inputs:
        text = {"input": inputs[content]}
    else:
        text = cut(content)
    out: dict[str, Any] = {}  # _compact's rule written out: once a message
    role = m.get("role")
    if role or (role is not False and role == 0):
        out["role"] = role
    if text or (text is not False and text == 0):
        out["content"] = text
    if m.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": t.get("id"),
                "name": _cap(t.get("name"), 200),
                "arguments": cut(t.get("arguments")),
            }
            for t in m["tool_calls"]
        ]
    for k in ("tool_call_id", "name"):
        if m.get(k) is not None:
            out[k] = _cap(m[k], 200)
    return out


class Scan:
    """The first pass over results.jsonl, fed one line at a time (:meth:`add`) so the reports can
    share one read: counts, histograms, error groups, which line numbers the page keeps, and (while
    every line still fits the limits, the usual case) the rows themselves, so no second pass is needed.

    ``results`` is the file being read (its line count says up front whether every row can fit),
    ``baseline`` the folder whose grades the page shows beside this run's.
    """

    def __init__(
        self,
        summary: dict[str, Any],
        results: Path,
        baseline: Path | None = None,
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
        self.base = _Baseline(baseline)
        self.regs = _regression_index(summary)
        self.total = 0
        self.keep: list[int] = []
        self.others: list[int] = []
        # No point building every row now when some lines will be left out.
        self.tables: list[str] | None = [] if _line_count(self.results) <= max_rows else None
        self.details: list[str] = []
        self.size = 0
        self.hist: dict[str, list[int]] = {}
        self.groups: Counter = Counter()
        self.models: set[str] = set()
        self._rng = random.Random(0)
        self._cut = _Cut(TEXT_CAP)

    def feed(self) -> Scan:
        """Read the whole of ``results`` (at the scan's trust) into the scan; returns it."""
        for i, rec in iter_records(self.results, self.trust):
            self.add(i, rec)
        return self

    def add(self, i: int, rec: dict[str, Any]) -> None:
        """Line ``i`` of results.jsonl."""
        self.total += 1
        total = self.total
        if rec.get("model"):
            self.models.add(str(rec["model"]))
        grades = rec.get("grades") or {}
        err = rec.get("error")
        row_errored = isinstance(err, dict)
        if row_errored:
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
            table, detail = _row(rec, self._cut, self.base, self.regs)
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
        if (
            failing
            or (self.regs and row_key(rec)[:2] in self.regs)
            or (self.base.grades and self.base.regressed(row_key(rec), grades))
        ):
            self.keep.append(i)
        elif len(self.others) < self.max_rows:  # reservoir sample of the passing lines
            self.others.append(i)
        else:
            j = self._rng.randrange(total)
            if j < self.max_rows:
                self.others[j] = i

    def result(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "failing": self.keep,
            "others": self.others,
            "models": sorted(self.models),
            "hist": self.hist,
            "rows": (self.tables, self.details, self.size) if self.tables is not None else None,
            "groups": [
                {"category": c, "grader": g, "message": m, "count": n}
                for (c, g, m), n in self.groups.most_common()
            ],
        }


def _choose(scan: dict[str, Any], limit: int) -> set[int]:
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
    cut: _Cut,
    base: _Baseline,
    regs: dict[tuple, set[str]],
    max_bytes: int | None,
    trust: Trust,
) -> tuple[list[str], list[str], int]:
    """The kept rows as JSON texts (table part, detail part) and their size; stops early (returning
    the projected size) once they cannot fit ``max_bytes``, so memory stays near ``max_bytes``."""
    tables: list[str] = []
    details: list[str] = []
    size = 0
    for _, rec in iter_records(results, trust, keep):
        table, detail = _row(rec, cut, base, regs)
        tables.append(script_json(table))
        details.append(script_json(detail))
        size += len(tables[-1].encode("utf-8")) + len(details[-1].encode("utf-8")) + 2
        if max_bytes is not None and size > max_bytes:
            return [], [], int(size * len(keep) / len(tables))
    return tables, details, size


def build_data(
    summary: dict[str, Any],
    results: Path,
    baseline: Path | None = None,
    *,
    max_rows: int = MAX_ROWS,
    max_bytes: int = MAX_DATA_BYTES,
    trust: Trust = Trust.OWN,
    scan: Scan | None = None,
) -> tuple[str, str, dict[str, Any]]:
    """(the page's data and the rows' details as script-safe JSON, facts for the template), cutting
    texts to fit ``max_bytes``; ``results`` is read at ``trust`` (see ci_evals.results.files).
    ``scan``: the first pass, already fed (its own results, baseline and limits then apply)."""
    if scan is None:
        scan = Scan(
            summary, results, baseline, max_rows=max_rows, max_bytes=max_bytes, trust=trust
        ).feed()
    results, max_rows, max_bytes, trust = scan.results, scan.max_rows, scan.max_bytes, scan.trust
    base, regs = scan.base, scan.regs
    scan = scan.result()
    metrics = summary.get("metrics") or {}
    names = list(metrics) or sorted(scan["hist"])
    limit = max_rows
    keep = _choose(scan, limit)
    cap = TEXT_CAP
    eager = scan.pop("rows")
    if eager is not None:
        rows, details, size = eager
    while eager is None:
        cut = _Cut(cap)
        rows, details, size = _rows_json(
            results, keep, cut, base, regs, max_bytes if len(keep) > 1 else None, trust
        )
        if size <= max_bytes or len(keep) <= 1:
            break
        smaller = max(MIN_TEXT_CAP, int(cap * max_bytes / size * 0.9))
        if smaller < cap and smaller < cut.longest:  # first cut the texts (where that helps) ...
            cap = smaller
        else:  # ... then hold fewer lines
            limit = max(1, min(len(keep) - 1, int(len(keep) * max_bytes / size * 0.9)))
            keep = _choose(scan, limit)
    head = script_json(
        {
            "metrics": [
                {"key": k, "label": (metrics.get(k) or {}).get("label") or k} for k in names
            ],
            "total_rows": scan["total"],
            "has_baseline": bool(base.grades),
            "text_cap": cap,
        }
    )
    n_fail = len(scan["failing"])
    scan.update(
        text_cap=cap,
        shown=len(rows),
        limit=limit,
        failing_total=n_fail,
        failing_shown=min(n_fail, len(rows)),
        others_total=scan["total"] - n_fail,
    )
    return head[:-1] + ',"rows":[' + ",".join(rows) + "]}", "[" + ",".join(details) + "]", scan
