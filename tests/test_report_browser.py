"""report.html in a real browser: Debian's chromium driven by Playwright (nothing downloads a browser).

Each test asserts what a person sees. Screenshots of the main views go to
``$CI_EVALS_ARTIFACTS`` (default ``build/screenshots``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from ci_evals.gating.baseline import compare_folder
from ci_evals.reports.html import write_report
from ci_evals.results.files import Trust
from tests import reportdata as rd
from tests.browser_driver import driver_executable, driver_problem

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CI_EVALS_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SHOTS = Path(os.environ.get("CI_EVALS_ARTIFACTS") or "build/screenshots")


@pytest.fixture(scope="module")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"chromium not found at {CHROMIUM}: run `bash scripts/install-chromium.sh` "
            "(or set CI_EVALS_CHROMIUM to a Chromium binary)",
            pytrace=False,
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the browser tests need Playwright's Python package: pip install -e '.[test]'",
            pytrace=False,
        )
    problem = driver_problem(driver_executable())
    if problem:
        pytest.fail(problem, pytrace=False)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


class Page:
    """A tab that records console messages, page errors and every request it makes."""

    def __init__(self, browser, width: int = 1400) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": 1000})
        self.console: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", lambda d: (self.console.append(f"dialog: {d.message}"), d.dismiss()))

    def open(self, report: Path, fragment: str = "", until: str = "domcontentloaded") -> float:
        """Open the report; the seconds until its script has drawn the table (and ``until`` happened)."""
        t0 = time.perf_counter()
        self.page.goto(report.resolve().as_uri() + fragment, wait_until=until)
        self.page.wait_for_selector("body[data-ready]", timeout=30_000)
        return time.perf_counter() - t0

    def rows(self) -> int:
        return self.page.locator("#sample-body tr").count()

    def text(self, selector: str) -> str:
        return self.page.locator(selector).inner_text()

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def close(self, report: Path) -> None:
        """Every report page: no console output at all, and no request but the file itself."""
        assert self.console == []
        assert self.requests == [report.resolve().as_uri()] * len(self.requests) and self.requests
        self.page.close()


@pytest.fixture
def tab(browser):
    return Page(browser)


@pytest.fixture
def report(tmp_path: Path) -> Path:
    base = rd.baseline_folder(tmp_path / "baseline")
    folder = rd.write_folder(tmp_path / "run", rd.summary(baseline=base), rd.records())
    summary = json.loads((folder / "summary.json").read_text())
    return write_report(folder, summary, compare_folder(summary, folder, base, Trust.OTHER))


def test_verdict_gates_and_rows_as_a_person_sees_them(tab, report):
    tab.open(report)
    assert tab.text("#verdict") == "FAILED"
    assert tab.text("#verdict-words") == "A gate failed on the measured scores."
    assert tab.text("#count") == "Showing 6 of 6 rows"
    assert tab.rows() == 6
    gates = tab.text("#gates tbody")
    assert "Answer gate" in gates and "1 of 6 samples errored (max_errors 0)" in gates
    assert "max 0 errors" in gates and "Style sub-gate" in gates
    assert tab.page.locator("#gates td.indent-1").inner_text() == "Style sub-gate"
    assert "boom: agent crashed" in tab.text("#errors") and "agent-123" in tab.text("#letta")
    assert tab.page.locator("#metrics svg.hist").count() == 2
    tab.shot("report-overview")
    tab.close(report)


def test_the_baseline_column_shows_the_baselines_scores(tab, report):
    tab.open(report)
    head = tab.page.locator("#sample-head th[data-key=baseline]").inner_text()
    assert head == "Baseline: Answer correct / Style"
    cells = [
        tab.page.locator("#sample-body tr").nth(i).locator("td").nth(6).inner_text()
        for i in range(6)
    ]
    # s1 run 1 falls back to the baseline's run 0; gpt-b and s4 were not in the baseline
    assert cells == [
        "1.000 / 0.500",
        "1.000 / 0.500",
        "new",
        "1.000 / 0.500",
        "0.000 / 0.500",
        "new",
    ]
    tab.close(report)


def test_filters_narrow_the_rows_and_say_how_many(tab, report):
    from playwright.sync_api import expect

    tab.open(report)
    tab.page.check("#f-failing")
    assert tab.text("#count") == "Showing 4 of 6 rows" and tab.rows() == 4
    tab.page.check("#f-errored")
    assert tab.text("#count") == "Showing 1 of 6 rows"
    assert tab.page.locator("#sample-body tr").get_attribute("data-id") == "s4"
    tab.page.uncheck("#f-failing")
    tab.page.uncheck("#f-errored")
    tab.page.check("#f-regressed")
    assert [
        tab.page.locator("#sample-body tr").nth(i).get_attribute("data-id")
        for i in range(tab.rows())
    ] == ["s2"]
    tab.page.uncheck("#f-regressed")
    tab.page.select_option("#f-model", "gpt-b")
    assert tab.text("#count") == "Showing 2 of 6 rows"
    tab.page.select_option("#f-model", "")
    tab.page.select_option("#f-tag", "hard")
    assert tab.text("#count") == "Showing 2 of 6 rows"
    tab.page.select_option("#f-tag", "")
    tab.page.fill("#f-text", "MARSEILLE")
    expect(tab.page.locator("#count")).to_have_text("Showing 1 of 6 rows")
    tab.page.fill("#f-text", "answer rationale s1")  # rationale text
    expect(tab.page.locator("#count")).to_have_text("Showing 3 of 6 rows")
    tab.shot("report-filtered")
    tab.close(report)


def test_sorting_by_a_score_orders_the_rows(tab, report):
    tab.open(report)
    tab.page.click("#sample-head th[data-key=answer]")
    scores = [
        tab.page.locator("#sample-body tr").nth(i).locator("td").nth(4).inner_text()
        for i in range(6)
    ]
    assert scores == ["error", "0.000", "0.000", "0.000", "1.000", "1.000"]
    tab.page.focus("#sample-head th[data-key=answer]")
    tab.page.keyboard.press("Enter")  # the keyboard sorts too: the same column again, descending
    first = tab.page.locator("#sample-body tr").nth(0).locator("td").nth(4).inner_text()
    assert first == "1.000"
    assert (
        tab.page.locator("#sample-head th[data-key=answer]").get_attribute("class")
        == "sortable desc"
    )
    tab.close(report)


def test_sample_detail_shows_trajectory_tool_calls_memory_and_baseline(tab, report):
    tab.open(report, "#sample=s2")
    detail = tab.page.locator("#detail")
    assert detail.is_visible()
    assert tab.text("#detail-title") == "Sample s2"
    text = detail.inner_text()
    assert "→ web_search" in text and '"query": "capital of France"' in text
    assert "Paris is the capital of France." in text  # the tool result
    assert "I should look it up." in text  # reasoning
    assert "Name: Ada" in text  # a memory block
    assert "regressed: answer" in text
    baseline = detail.locator("td.baseline").first.inner_text()
    assert baseline.startswith("1.000 · pass") and "baseline said Paris" in baseline
    tab.shot("report-detail")
    tab.close(report)


def test_models_and_repeats_side_by_side_and_a_link_per_sample(tab, report):
    from playwright.sync_api import expect

    tab.open(report)
    tab.page.click("#sample-body a[href='#sample=s1']")
    # The link changes the hash; the page draws the detail on the hashchange event, a task that
    # runs after click() returns: wait for it (a count read at once raced it, and lost whenever
    # the browser was already warm from an earlier test of this file).
    cols = tab.page.locator("#detail .side-by-side > .col")
    expect(cols).to_have_count(3)
    assert [cols.nth(i).locator("h4").inner_text() for i in range(3)] == [
        "gpt-a · run 0",
        "gpt-a · run 1",
        "gpt-b · run 0",
    ]
    assert tab.page.evaluate("location.hash") == "#sample=s1"
    tab.close(report)


def test_errored_sample_detail_names_its_category(tab, report):
    tab.open(report, "#sample=s4")
    assert "target error: boom: agent crashed" in tab.text("#detail")
    tab.close(report)


def test_untrusted_text_never_runs_or_becomes_markup(tab, tmp_path):
    from playwright.sync_api import expect

    evil = rd.XSS
    recs = []
    for payload in evil:
        rec = rd.record(payload, model=payload, score=0.0, answer=payload, tags=(payload,))
        rec["grades"]["answer"]["rationale"] = payload
        rec["trajectory"]["turns"][0][2]["tool_calls"][0].update(name=payload, arguments=payload)
        rec["trajectory"]["memory_blocks"][payload] = payload
        rec["input"] = payload
        rec["ground_truth"] = payload
        recs.append(rec)
    recs.append(rd.record("err", error=" ".join(evil)))
    s = rd.summary(n=len(recs))
    s["suite"] = s["description"] = evil[3]
    s["gates"][0]["label"] = s["gates"][0]["reason"] = evil[1]
    s["errors"]["groups"][0]["message"] = evil[1]
    folder = rd.write_folder(tmp_path / "evil", s, recs)
    report = write_report(folder, s)
    tab.open(report)
    page = tab.page
    assert tab.rows() == 5
    for payload in evil:
        page.goto(report.resolve().as_uri() + "#sample=" + quote(payload, safe=""))
        page.wait_for_selector("body[data-ready]")
        assert payload in page.locator("#detail").inner_text()
        page.fill("#f-text", payload)  # its own row and the errored one that quotes them all
        expect(page.locator("#sample-body tr")).to_have_count(2)
        assert page.locator("#sample-body tr").first.get_attribute("data-id") == payload
        assert tab.text("#count") == "Showing 2 of 5 rows"
        page.fill("#f-text", "")
        expect(page.locator("#sample-body tr")).to_have_count(5)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0
    assert page.locator("body a[href^='javascript:']").count() == 0
    assert page.locator("script").count() == 3  # two data blocks and the report's own script
    assert evil[3] in tab.text("h1") and evil[1] in tab.text("#gates")
    # Even a script injected by other means is refused by the page's Content-Security-Policy.
    page.evaluate("""() => { const s = document.createElement('script');
                             s.textContent = 'window.__pwned = 5'; document.body.appendChild(s); }""")
    assert page.evaluate("window.__pwned") is None
    tab.shot("report-untrusted")
    csp = [m for m in tab.console if "Content Security Policy" in m]
    assert len(csp) == 1  # the refusal of the injected script, nothing else
    tab.console.remove(csp[0])
    tab.close(report)


def test_the_page_cannot_fetch_anything(tab, report, httpserver):
    httpserver.expect_request("/leak").respond_with_data("x")
    tab.open(report)
    url = httpserver.url_for("/leak")
    result = tab.page.evaluate(f"fetch({json.dumps(url)}).then(() => 'fetched', () => 'blocked')")
    assert result == "blocked"
    assert httpserver.log == []
    tab.console = [m for m in tab.console if "Content Security Policy" not in m]
    tab.requests = [u for u in tab.requests if u != url]
    tab.close(report)


def test_row_limit_keeps_failing_rows_and_says_so(tab, tmp_path):
    from ci_evals.reports import html

    recs = [rd.record(f"p{i}", score=1.0, tool=False) for i in range(300)]
    recs += [rd.record(f"f{i}", score=0.0, tool=False) for i in range(20)]
    folder = rd.write_folder(tmp_path / "big", rd.summary(n=len(recs)), recs)
    page = folder / "report.html"
    page.write_text(
        html.render_report(
            json.loads((folder / "summary.json").read_text()),
            folder / "results.jsonl",
            max_rows=100,
        ),
        encoding="utf-8",
    )
    tab.open(page)
    assert tab.text("#row-limit") == (
        "This report holds 100 of 320 result lines (at most 100 lines and 20 MB "
        "of data): all 20 failing, errored or regressed lines and a random 80 "
        "of the 300 others. results.jsonl has them all."
    )
    assert tab.text("#count") == "Showing 100 of 100 rows (this report holds 100 of 320)"
    tab.page.check("#f-failing")
    assert tab.text("#count").startswith("Showing 20 of 100 rows")
    tab.close(page)


def _big_folder(tmp: Path, n: int) -> Path:
    recs = []
    for i in range(n):
        rec = rd.record(
            f"sample-{i:05d}",
            model=("gpt-a", "gpt-b")[i % 2],
            score=(i % 7) / 6,
            answer=f"answer {i} " + "lorem ipsum dolor sit amet " * 20,
            tags=(f"t{i % 5}",),
        )
        rec["grades"]["answer"]["rationale"] = "the judge explains at some length " * 10
        recs.append(rec)
    return rd.write_folder(tmp, rd.summary(n=n), recs)


@pytest.mark.parametrize("n", [1_000, 10_000])
def test_large_reports_open_fast_and_stay_small(browser, tmp_path, n, capsys):
    """Opened three times in fresh tabs; the best time must be under 2 s (the others show the noise
    of a shared CI machine). Table = the table is drawn and can be sorted and filtered; loaded = the
    browser has read the whole file; detail = a sample's detail is on screen (from navigation)."""
    folder = _big_folder(tmp_path / f"n{n}", n)
    report = write_report(folder, json.loads((folder / "summary.json").read_text()))
    size = report.stat().st_size
    table, loaded, detail = [], [], []
    for _ in range(3):
        tab = Page(browser)
        t0 = time.perf_counter()
        table.append(tab.open(report, until="commit"))
        assert tab.text("#count") == f"Showing {n:,} of {n:,} rows"
        tab.page.click("#sample-body tr:first-child a")
        tab.page.wait_for_selector("#detail:not([hidden])")
        detail.append(time.perf_counter() - t0)
        loaded.append(
            tab.page.evaluate(
                "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
            )
            / 1000
        )
        assert tab.text("#detail-title") == "Sample sample-00000"
        t1 = time.perf_counter()
        tab.page.check("#f-failing")
        filter_s = time.perf_counter() - t1
        assert tab.rows() == 100
        if n == 10_000:
            tab.shot("report-10000")
        tab.close(report)

    def fmt(xs: list[float]) -> str:
        return ", ".join(f"{x:.2f}" for x in xs)

    with capsys.disabled():
        print(
            f"\nreport.html with {n:,} samples: {size / 1e6:.1f} MB; table drawn in {fmt(table)} s, "
            f"file read in {fmt(loaded)} s, a detail shown in {fmt(detail)} s; "
            f"'failing only' filter in {filter_s:.2f} s"
        )
    assert size < 25_000_000
    assert min(table) < 2.0
