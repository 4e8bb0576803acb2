"""Safe text and numbers for every renderer (summary.md, the PR comment, JUnit, the console, HTML).

Everything that comes from a model, a dataset, a grader or the suite file is untrusted: it goes
through :func:`escape_md` (one line: table cells, headings), :func:`fenced` (multi-line code
blocks) or :func:`escape_html`, so it cannot inject HTML, ping people (``@user``, ``#123``) or
break the layout. Numbers are formatted one way everywhere (``fmt_*``).
"""

from __future__ import annotations

import html
import re
from typing import Any

from ci_evals._util.text import fit
from ci_evals.results.records import Summary

ZWJ = "\u200d"
_MENTION = re.compile(r"([@#])(?=[A-Za-z0-9_])(?!\d+\.\d)")
_GH_REF = re.compile(r"\b(GH)-(?=\d)", re.IGNORECASE)
_MD_SPECIAL = re.compile(r"([\\`*\[\]|~])")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_LINE_START = re.compile(r"^([#>+=-])")


# ---------------------------------------------------------------- escaping and truncation


def neutralize_mentions(text: str) -> str:
    """Break ``@user``, ``@org/team``, ``#123`` and ``GH-123`` with a zero-width joiner: no pings, no backlinks."""
    return _GH_REF.sub(rf"\1-{ZWJ}", _MENTION.sub(rf"\1{ZWJ}", text))


def escape_md(value: Any, limit: int | None = None) -> str:
    """Untrusted text made safe for one line of markdown (a table cell, a heading, a list item).

    Newlines become spaces; ``limit`` truncates before escaping, so no escape is cut in half.
    ``& < >`` become entities (no raw HTML), the punctuation that starts links, images, code spans,
    emphasis or table cells is backslash-escaped, and mentions are neutralised.
    """
    text = " ".join(("" if value is None else str(value)).split())
    if limit is not None:
        text = fit(text, limit)
    text = html.escape(text, quote=False)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = _EDGE_UNDERSCORE.sub(r"\\_", text)
    return neutralize_mentions(_LINE_START.sub(r"\\\1", text))


def escape_html(value: Any, limit: int | None = None) -> str:
    """Untrusted text inside an HTML element such as ``<summary>``: entities only, one line."""
    text = " ".join(("" if value is None else str(value)).split())
    if limit is not None:
        text = fit(text, limit)
    return neutralize_mentions(html.escape(text, quote=True))


def fenced(text: str, limit: int | None = None, lang: str = "text") -> str:
    """Multi-line untrusted text as a fenced code block that the text cannot close.

    The fence is one backtick longer than the longest backtick run inside, so nothing in the text
    can open or close it; inside a code block GitHub renders no HTML and pings no one.
    """
    if limit is not None:
        text = fit(text, limit)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{lang}\n{body}{fence}"


def code(text: Any) -> str:
    """Short text of our own (a pass rule) as an inline code span."""
    return "`" + str(text).replace("`", "'").replace("|", "\\|") + "`"


# ---------------------------------------------------------------- number formatting


def fmt_score(value: Any) -> str:
    """A score or metric value with three decimals; ``–`` when missing."""
    return "–" if value is None else f"{float(value):.3f}"


def fmt_pct(value: Any) -> str:
    """A fraction as a percentage with one decimal; ``–`` when missing."""
    return "–" if value is None else f"{100 * float(value):.1f}%"


def fmt_interval(interval: Any, pct: bool = False) -> str:
    """``[lo, hi]`` as ``0.700–0.900`` (or percentages); empty when there is none."""
    if not interval or len(interval) != 2 or None in interval:
        return ""
    f = fmt_pct if pct else fmt_score
    return f"{f(interval[0])}–{f(interval[1])}"


def fmt_delta(value: Any, pct: bool = False) -> str:
    """A signed change with an arrow: ``▲ +0.050``, ``▼ −0.100``, ``= 0.000`` (``pp`` for rates)."""
    if value is None:
        return "–"
    v = float(value)
    text = f"{abs(100 * v):.1f} pp" if pct else f"{abs(v):.3f}"
    if abs(v) < 5e-4:
        return f"= {text}"
    return f"▲ +{text}" if v > 0 else f"▼ −{text}"


def fmt_int(value: Any) -> str:
    """An integer with thousands separators."""
    return f"{int(value or 0):,}"


def fmt_cost(value: Any) -> str:
    """US dollars with four decimals, or ``n/a`` when the suite gave no prices."""
    return "n/a" if value is None else f"${float(value):.4f}"


def with_interval(value: Any, interval: Any, pct: bool = False) -> str:
    """A value followed by its 95 % interval when one was computed: ``0.812 (0.700–0.900)``."""
    main = fmt_pct(value) if pct else fmt_score(value)
    span = fmt_interval(interval, pct)
    return f"{main} ({span})" if span else main


def noise_lines(summary: Summary) -> list[str]:
    """One line per metric whose repeats were measured (``metrics[].noise``), with the baseline's:
    ``quality: repeats (3 runs) disagree on 18 % of samples; the mean varies ±0.021 run to run
    (baseline: 15 %, ±0.019)``. Plain text: each renderer escapes it."""
    out = []
    base = (
        ((summary.get("baseline") or {}).get("metrics") or {})
        if isinstance(summary.get("baseline"), dict)
        else {}
    )
    for name, m in (summary.get("metrics") or {}).items():
        noise = m.get("noise") if isinstance(m, dict) else None
        if not isinstance(noise, dict):
            continue
        how = "judge re-asks" if noise.get("source") == "judge_repeats" else "runs"
        line = (
            f"{m.get('label') or name}: repeats ({fmt_int(noise.get('repeats'))} {how}) disagree on "
            f"{fmt_pct(noise.get('disagree_rate'))} of samples; the mean varies ±{fmt_score(noise.get('run_spread'))} "
            "run to run"
        )
        theirs = (
            (base.get(name) or {}).get("baseline_noise")
            if isinstance(base.get(name), dict)
            else None
        )
        if isinstance(theirs, dict):
            line += f" (baseline: {fmt_pct(theirs.get('disagree_rate'))}, ±{fmt_score(theirs.get('run_spread'))})"
        out.append(line)
    return out
