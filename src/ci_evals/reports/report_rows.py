"""One result line as report.html's script reads it: its table row and its detail, every text cut.

A text longer than the cut is kept as ``{"text", "length"}`` (the page shows the cut and the full
length); a text said twice in a line is stored once, as a reference; empty entries are left out
(the page reads a missing key as empty). The baseline's grades for the same sample go beside this
run's, and the metrics on which its (model, sample id) regressed are listed: both from the run's
one :class:`~ci_evals.gating.comparison.Comparison` (a row regressed exactly when the regression
gates count its sample).
"""

from __future__ import annotations

from typing import Any

from ci_evals.gating.comparison import Capped, Comparison, capped, row_key
from ci_evals.reports.costspeed import sample_values
from ci_evals.results.line import submissions_of
from ci_evals.results.records import Message, ResultRecord


class Cut:
    """:func:`capped` at one limit, remembering the longest text it saw (whether a smaller limit would help)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.longest = 0

    def __call__(self, value: Any) -> Capped:
        if value.__class__ is str and len(value) <= self.limit:  # the usual text: kept whole
            if len(value) > self.longest:
                self.longest = len(value)
            return value
        if value is None:
            return None
        out = capped(value, self.limit)
        if isinstance(out, dict):
            self.longest = max(self.longest, out["length"])
        elif isinstance(out, str):
            self.longest = max(self.longest, len(out))
        return out


def _compact(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without its empty entries (None, "", [], {}, False): the page reads a missing key as empty."""
    return {k: v for k, v in d.items() if v or (v is not False and v == 0)}


def _hits(holder: Any) -> int:
    """LLM calls answered from the cache, as a record (its target) or a grade's metadata counts them."""
    n = holder.get("cache_hits") if isinstance(holder, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def page_row(
    rec: ResultRecord, cut: Cut, comparison: Comparison | None
) -> tuple[dict[str, Any], dict[str, Any]]:
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
    flags: dict[str, dict[str, Any]] = {}
    texts: dict[str, dict[str, Any]] = {}
    for (
        name,
        g,
    ) in grades_in.items():  # _compact's rule written out for the flags: every grade shown
        meta = g.get("metadata")
        flag: dict[str, Any] = {}
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
        # _compact's rule written out (a cut text is kept when not empty): four times a line
        entry: dict[str, Any] = {}
        if value := cut(g.get("error")):
            entry["error"] = value
        category: object = g.get("error_category")  # as the line holds it: kept unless empty
        if category or (category is not False and category == 0):
            entry["category"] = category
        if value := cut(g.get("rationale")):
            entry["rationale"] = value
        text = subs.get(name)
        if isinstance(text, str) and first.get(text, name) != name:
            entry["submission"] = {"ref": first[text]}
        elif text is not None and (text := cut(text)):
            entry["submission"] = text
        if meta and (shown := cut(meta)):
            entry["metadata"] = shown
        if entry:
            texts[name] = entry
    costs = [c for c in costs if isinstance(c, int | float)]
    regressed = comparison.regressed_on(key) if comparison is not None else ()
    old = comparison.grades_of(key) if comparison is not None else None
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
            "cs": {k: v for k, v in sample_values(rec).items() if k != "tokens"},
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
    m: Message, cut: Cut, submissions: dict[str, str], inputs: dict[str, int]
) -> dict[str, Any]:
    content = m.get("content")
    if isinstance(content, str) and content in submissions:
        text: Any = {"ref": submissions[content]}
    elif isinstance(content, str) and m.get("role") == "user" and content in inputs:
        text = {"input": inputs[content]}
    else:
        text = cut(content)
    out: dict[str, Any] = {}  # _compact's rule written out: once a message
    role: Any = m.get("role")  # any JSON value in a line read as written
    if role or (role is not False and role == 0):
        out["role"] = role
    if text or (text is not False and text == 0):
        out["content"] = text
    calls = m.get("tool_calls")
    if calls:
        out["tool_calls"] = [
            {
                "id": t.get("id"),
                "name": capped(t.get("name"), 200),
                "arguments": cut(t.get("arguments")),
            }
            for t in calls
        ]
    if (call_id := m.get("tool_call_id")) is not None:
        out["tool_call_id"] = capped(call_id, 200)
    if (name := m.get("name")) is not None:
        out["name"] = capped(name, 200)
    return out
