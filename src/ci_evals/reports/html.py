"""report.html: one self-contained page per results folder (no network, no server).

The page is rendered with Jinja2 (autoescaped) from summary.json and results.jsonl; the rows go in
as JSON inside ``<script type="application/json">`` (see :mod:`ci_evals.reports.report_data`) and a
small script of our own draws the sample table and detail, inserting every untrusted string with
``textContent``. A Content-Security-Policy meta tag allows only that script and stylesheet (by
hash) and no fetch of any kind.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci_evals._util import usercache
from ci_evals.gating.comparison import Comparison
from ci_evals.gating.verdict import stability_note, unstable
from ci_evals.reports import costspeed
from ci_evals.reports import text as fmt
from ci_evals.reports.report_data import BUCKETS, MAX_DATA_BYTES, MAX_ROWS, Scan, build_data
from ci_evals.reports.verdicts import verdict_of, words_of
from ci_evals.results.files import Trust
from ci_evals.results.records import Summary
from ci_evals.results.writer import write_text

if TYPE_CHECKING:  # imported when first rendered (see template)
    import jinja2

OPS = {"gte": "≥", "gt": ">", "lte": "≤", "lt": "<", "eq": "="}


def _histogram_svg(counts: list[int]) -> list[dict[str, Any]]:
    """Bars for the template's inline SVG: x, y, height, count and a title per bucket. The plot area
    is x 20..120 (scores 0..1) and y 4..40 (0..the largest count), axes labelled by the template."""
    top = max(counts) or 1
    return [
        {
            "x": 20 + i * 10 + 1,
            "h": round(36 * c / top, 2),
            "y": round(40 - 36 * c / top, 2),
            "count": c,
            "title": f"{i / BUCKETS:.1f}–{(i + 1) / BUCKETS:.1f}: {c} sample{'s' if c != 1 else ''}",
        }
        for i, c in enumerate(counts)
    ]


def _asset(name: str) -> str:
    return (
        resources.files("ci_evals.reports").joinpath("templates", name).read_text(encoding="utf-8")
    )


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode(
        "ascii"
    )


_OPTIONS: dict[str, Any] = {"autoescape": True, "trim_blocks": True, "lstrip_blocks": True}
"""jinja2.Environment's keyword options (all flags)."""


def _jinja2() -> Any:
    """jinja2, imported; once more after ``importlib.invalidate_caches()`` when a part of it is not
    found. User code that closes descriptors (a grader's ``os.close(1)``) while another thread
    lists jinja2's folder for an import can hand that listing a reused descriptor: it reads as no
    directory, Python caches the folder as empty, and every later import from it fails ("No
    module named 'jinja2.bccache'", seen once in the test suite)."""
    try:
        import jinja2
    except ModuleNotFoundError:
        importlib.invalidate_caches()
        import jinja2
    return jinja2


@functools.cache
def template() -> jinja2.Template:
    """The page's Jinja2 template, compiled once per process, or loaded compiled from the
    :func:`cache_dir` of an earlier run (compiling costs 0.1 s here, a seventh of the quickstart's
    run; loading 2 ms). :func:`warm` gets it ahead, while this process would wait anyway."""
    jinja2 = _jinja2()
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ci_evals.reports", "templates"), **_OPTIONS
    )

    def given(value: Any) -> bool:
        return value is not None and not isinstance(value, jinja2.Undefined)

    def lenient(
        fn: Callable[..., str],
    ) -> Callable[..., str]:  # a missing key (older summary.json) shows as "–", like a null
        return lambda value, *a: fn(value if given(value) else None, *a)

    env.tests["given"] = given
    env.tests["unstable"] = unstable
    env.filters["stability_note"] = stability_note
    env.filters.update(
        {
            name: lenient(fn)
            for name, fn in (
                ("score", fmt.fmt_score),
                ("pct", fmt.fmt_pct),
                ("interval", fmt.fmt_interval),
                ("delta", fmt.fmt_delta),
                ("cost", fmt.fmt_cost),
            )
        }
    )
    env.bytecode_cache = _bytecode_cache(jinja2, sorted(env.filters), sorted(env.tests))
    return env.get_template("report.html.j2")


def cache_dir() -> Path | None:
    """Where the compiled page is kept between runs (:func:`ci_evals._util.usercache.cache_dir`)."""
    return usercache.cache_dir("templates")


def _bytecode_cache(jinja2: Any, filters: list[str], tests: list[str]) -> Any:
    """Jinja2's own bytecode cache (keyed on the template's source, Jinja2's and Python's
    versions) in :func:`cache_dir`, or None (compiled each time) unless that folder is this
    user's alone: created 0700, never one that others may write to (its code would be run). A
    damaged entry is compiled again; a folder that cannot be written is only read."""
    folder = usercache.own_cache_dir("templates")
    if folder is None:
        return None

    class Cache(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket: Any) -> None:
            try:
                super().load_bytecode(bucket)
            except Exception:  # a truncated or foreign file: compiled again, and rewritten
                bucket.reset()

        def dump_bytecode(self, bucket: Any) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:
                pass

    # What else the compiled code depends on: the options, and which filters and tests exist.
    tag = hashlib.sha256(repr((sorted(_OPTIONS.items()), filters, tests)).encode()).hexdigest()[:12]
    return Cache(str(folder), f"report-{tag}-%s.cache")


def warm() -> None:
    """Compile the page's template now (see :func:`template`)."""
    template()


def render_report(
    summary: Summary,
    results: Path,
    comparison: Comparison | None = None,
    *,
    max_rows: int = MAX_ROWS,
    max_bytes: int = MAX_DATA_BYTES,
    trust: Trust = Trust.OWN,
    scan: Scan | None = None,
) -> str:
    """The whole report.html as text; ``comparison``: the run's with its baseline (its block, its
    regressions and the baseline's grades; None: summary.json's baseline block, no baseline columns);
    ``scan``: the first pass over the results, already fed (:func:`report_scan`), whose results,
    comparison and limits then apply."""
    from markupsafe import Markup

    if scan is not None:
        max_rows, max_bytes, comparison = scan.max_rows, scan.max_bytes, scan.comparison
    data, details, facts = build_data(
        summary, results, comparison, max_rows=max_rows, max_bytes=max_bytes, trust=trust, scan=scan
    )
    base = comparison.block if comparison is not None else summary.get("baseline")
    script, style = _asset("report.js"), _asset("report.css")
    groups = (summary.get("errors") or {}).get("groups")
    models = list(summary.get("models") or {}) or facts["models"]
    return template().render(
        s=summary,
        verdict=verdict_of(summary) or "none",
        words=words_of(summary),
        ops=OPS,
        script=Markup(script),
        style=Markup(style),
        script_hash=_sha256(script),
        style_hash=_sha256(style),
        data=Markup(data),
        details=Markup(details),
        hist={k: _histogram_svg(v) for k, v in facts["hist"].items()},
        judges=[
            (name, g)
            for name, g in ((summary.get("config") or {}).get("graders") or {}).items()
            if isinstance(g, dict) and isinstance(g.get("model"), str)
        ],
        groups=groups if isinstance(groups, list) else facts["groups"],
        models=models,
        base=base,
        base_metrics=(base or {}).get("metrics") or {},
        scan=facts,
        max_rows=max_rows,
        max_mb=f"{max_bytes / 1e6:g}",
        spent=_cost_speed(summary),
    )


def _cost_speed(summary: Summary) -> dict[str, Any] | None:
    """The "Cost and speed" block's rows and lines (plain text: the template escapes them)."""
    block = costspeed.block_of(summary)
    if block is None or not costspeed.has_block(summary):
        return None
    rows = costspeed.rows(summary)
    return {
        "rows": rows,
        "with_base": any(r.change is not None for r in rows),
        "waits": costspeed.waits(block),
        "run_cost": costspeed.run_cost(block),
        "budget": costspeed.budget(block),
    }


def report_scan(out: Path, comparison: Comparison | None = None, trust: Trust = Trust.OWN) -> Scan:
    """report.html's first pass over ``out/results.jsonl``, to be fed line by line (or with
    :meth:`~ci_evals.reports.report_data.Scan.feed`) and handed to :func:`write_report`.

    ``comparison``: the run's with its baseline, read once by the caller
    (:meth:`ci_evals.gating.baseline.Baseline.comparison`, or
    :func:`ci_evals.gating.baseline.compare_folder` for a folder written earlier): the baseline
    columns and the regressed rows; None: neither.
    ``trust`` is how far ``out`` is trusted (a folder from elsewhere is checked line by line).
    """
    return Scan(
        out / "results.jsonl",
        comparison,
        max_rows=MAX_ROWS,
        max_bytes=MAX_DATA_BYTES,
        trust=trust,
    )


def write_report(
    out: Path,
    summary: Summary,
    comparison: Comparison | None = None,
    trust: Trust = Trust.OWN,
    scan: Scan | None = None,
) -> Path:
    """Write ``out/report.html`` (atomically, never through a symlink) and return its path.

    ``comparison`` and ``trust`` as for :func:`report_scan`; ``scan``: that pass, already fed.
    """
    if scan is None:
        scan = report_scan(out, comparison, trust).feed()
    text = render_report(summary, out / "results.jsonl", scan=scan)
    return write_text(out / "report.html", text)
