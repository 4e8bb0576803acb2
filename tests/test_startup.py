"""Fast start: ``--version`` and ``validate`` import no heavy library."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = (
    "openai",
    "letta_client",
    "nltk",
    "rouge_score",
    "rapidfuzz",
    "httpx",
    "pydantic",
    "rich",
    "jinja2",
)


def printed_by(code: str, *args: str) -> list[str]:
    """The lines a new interpreter prints running ``code`` with ``args`` (it must exit 0)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    ).stdout.splitlines()


def modules_after(code: str) -> set[str]:
    """The modules a new interpreter holds once it ran ``code``."""
    return set(eval(printed_by(code + "\nimport sys\nprint(sorted(m for m in sys.modules))")[-1]))


def imported_by(code: str) -> list[str]:
    mods = modules_after(code)
    return [h for h in HEAVY if h in mods]


def test_version_imports_nothing_heavy():
    code = (
        "import contextlib, io\nfrom ci_evals.cli.app import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n    main(['--version'])"
    )
    assert imported_by(code) == []


def test_validate_of_a_tool_suite_imports_no_llm_or_metric_library():
    code = (
        "import contextlib, io\nfrom ci_evals.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['validate', 'examples/quickstart/suite.yaml']) == 0"
    )
    assert imported_by(code) == ["pydantic"]


def test_version_prints_the_version():
    out = subprocess.run(
        [sys.executable, "-m", "ci_evals", "--version"], capture_output=True, text=True
    )
    assert (out.returncode, out.stdout.strip()) == (0, "ci-evals 0.1.0")


def test_run_of_a_replay_suite_imports_no_http_or_llm_client(tmp_path):
    """A suite that calls no endpoint loads no HTTP client, LLM SDK or Letta client (issue 41 item 7)."""
    replay_suite(tmp_path)
    code = (
        "import contextlib, io\nfrom ci_evals.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['run', {str(tmp_path / 'suite.yaml')!r}, '--output', {str(tmp_path / 'out')!r}, '-q']) == 0"
    )
    mods = modules_after(code)
    assert (tmp_path / "out" / "report.html").is_file()
    assert [
        m
        for m in ("aiohttp", "openai", "letta_client", "anthropic", "google.genai", "httpx")
        if m in mods
    ] == []


def test_a_fresh_run_builds_no_contract_validator_and_a_baseline_run_builds_them(tmp_path):
    """The contract's validators (30 ms of start-up) are built when a document from elsewhere is
    read, such as a baseline, and never by a run that reads none."""
    replay_suite(tmp_path)
    code = (
        "import contextlib, io, sys\nfrom ci_evals.cli.app import main\n"
        "from ci_evals.results import contract\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['run', sys.argv[1], '--output', sys.argv[2], '-q', *sys.argv[3:]]) == 0\n"
        "print(contract.summary_adapter.cache_info().currsize, contract.record_adapter.cache_info().currsize)"
    )
    suite, first, second = (str(tmp_path / p) for p in ("suite.yaml", "out", "again"))

    def built(*args: str) -> str:
        return printed_by(code, *args)[-1]

    assert built(suite, first) == "0 0"
    assert built(suite, second, "--baseline", first) == "1 1"


def replay_suite(folder) -> str:
    """A 3-sample replay suite graded by one tool grader (no endpoint, no background thread)."""
    import json

    (folder / "data.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "input": f"q{i}", "ground_truth": "a"}) + "\n" for i in range(3)
        )
    )
    (folder / "outputs.jsonl").write_text(
        "".join(json.dumps({"id": i, "output": "a"}) + "\n" for i in range(3))
    )
    (folder / "suite.yaml").write_text(
        json.dumps(
            {
                "name": "replay",
                "dataset": "data.jsonl",
                "target": {"kind": "replay", "outputs": "outputs.jsonl"},
                "graders": {"exact": {"kind": "tool", "function": "exact_match"}},
                "gate": {"metric_key": "exact", "op": "gte", "value": 1.0},
            }
        )
    )
    return str(folder / "suite.yaml")


def model_suite(folder) -> str:
    """One sample: a model target judged by a rubric grader, both on OPENAI_BASE_URL."""
    import json

    (folder / "data.jsonl").write_text(json.dumps({"id": 1, "input": "hi"}) + "\n")
    (folder / "suite.yaml").write_text(
        json.dumps(
            {
                "name": "model",
                "dataset": "data.jsonl",
                "target": {"kind": "model", "model": "gpt-4o-mini"},
                "graders": {
                    "quality": {
                        "kind": "rubric",
                        "model": "gpt-4o-mini",
                        "prompt": "Rate {submission}",
                    }
                },
                "gate": {"metric_key": "quality", "op": "gte", "value": 0.0},
            }
        )
    )
    return str(folder / "suite.yaml")


BUILT = """
import pydantic
def subs(c):
    for s in c.__subclasses__():
        yield s
        yield from subs(s)
models = [c for c in subs(pydantic.BaseModel) if c.__module__.startswith("ci_evals.")]
print(sorted(c.__qualname__ for c in models if c.__pydantic_complete__))
print(sorted(c.__qualname__ for c in models if not c.model_config.get("defer_build")))
"""


def test_loading_a_suite_builds_only_the_spec_models_it_uses(tmp_path):
    """Every pydantic model of ours defers its validator to its first use (``defer_build``): a
    model + rubric suite builds 4 of the 27 (building all at import was 40-60 ms of every run's
    start, issue 41 item 7), and the others still validate (their own tests)."""
    code = (
        "import contextlib, io\nfrom ci_evals.cli.app import main\n"
        "import ci_evals.cli.commands, ci_evals.graders.reward\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['validate', {model_suite(tmp_path)!r}]) == 0\n" + BUILT
    )
    out = printed_by(code)
    assert eval(out[-2]) == ["ModelTargetSpec", "RubricSpec", "SuiteSpec", "_NoConfig"]


def test_every_model_of_ours_defers_its_build():
    """The rule above, for the models of every module (a new one built at import fails here)."""
    code = (
        "import importlib, pkgutil, ci_evals\n"
        "for m in pkgutil.walk_packages(ci_evals.__path__, 'ci_evals.'):\n"
        "    if not m.name.endswith('__main__'):\n"
        "        importlib.import_module(m.name)\n" + BUILT + "print(len(models))"
    )
    out = printed_by(code)
    assert (eval(out[-3]), eval(out[-2])) == ([], [])  # none built by an import, none eager
    assert int(out[-1]) >= 50  # the walk found them all (53 today)


# Records, in the child, the thread that first imports each module named in WATCHED.
WATCH = """
import sys, threading
WATCHED = {watched!r}
first = {{}}
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in WATCHED and name not in first:
            first[name] = threading.current_thread().name
        return None
sys.meta_path.insert(0, Watch())
"""


def first_importers(argv: list[str], watched: tuple[str, ...]) -> dict[str, str]:
    """``ci-evals`` with ``argv`` in a new process (it must exit 0): the name of the thread that
    first imported each watched module, in the order they were first imported."""
    code = (
        WATCH.format(watched=watched)
        + "import contextlib, io\nfrom ci_evals.cli.app import main\n"
        + "with contextlib.redirect_stdout(io.StringIO()):\n"
        + f"    code = main({argv!r})\n"
        + "import json\nprint(json.dumps([code, first]))"
    )
    out = printed_by(code)[-1]
    import json

    exit_code, first = json.loads(out)
    assert exit_code == 0, out
    return first


END = ("jinja2", "genai_prices", "aiohttp")


def test_a_model_run_imports_its_end_while_it_waits_on_the_network(tmp_path, monkeypatch):
    """Jinja2 and report.html's template load on the background thread the runner starts once
    aiohttp is imported, after the price list (the first answer needs it)."""
    from tests.fakes.openai_server import FakeOpenAI

    with FakeOpenAI(latency=1.5) as server:  # 3 s of run: ample time for those imports
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no price memo yet
        first = first_importers(
            ["run", model_suite(tmp_path), "--output", str(tmp_path / "o"), "-q", "--no-cache"],
            END,
        )
    assert (tmp_path / "o" / "report.html").is_file()
    assert first == {
        "aiohttp": "MainThread",
        "genai_prices": "ci-evals-prices",
        "jinja2": "ci-evals-meanwhile",
    }
    assert list(first) == ["aiohttp", "genai_prices", "jinja2"]  # one after the other


REPORTS = (
    "ci_evals.run.finish",
    "ci_evals.reports.write",
    "ci_evals.gating.summary",
    "ci_evals.cli.merge",
)


def test_a_model_runs_reports_load_on_its_thread_and_no_other_commands_code(tmp_path, monkeypatch):
    """The run's end (ci_evals.run.finish: the reports, the summary's gates) is not imported by
    its start (20 ms of it, issue 41 item 7), but by the thread that starts once the requests
    are out; the other commands' modules (merge's, report's...) not at all."""
    from tests.fakes.openai_server import FakeOpenAI

    with FakeOpenAI(latency=1.0) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        first = first_importers(
            ["run", model_suite(tmp_path), "--output", str(tmp_path / "o"), "-q", "--no-cache"],
            REPORTS,
        )
    assert first == {
        "ci_evals.gating.summary": "ci-evals-meanwhile",
        "ci_evals.run.finish": "ci-evals-meanwhile",
        "ci_evals.reports.write": "ci-evals-meanwhile",
    }


def test_a_run_that_waits_on_nothing_loads_its_reports_at_its_end(tmp_path):
    first = first_importers(
        ["run", replay_suite(tmp_path), "--output", str(tmp_path / "o"), "-q"], REPORTS
    )
    assert first == {
        "ci_evals.gating.summary": "MainThread",
        "ci_evals.run.finish": "MainThread",
        "ci_evals.reports.write": "MainThread",
    }


SENDS = """
import time
import aiohttp.client_reqrep as reqrep
sent = []
_send = reqrep.ClientRequest.send
async def send(self, conn):
    sent.append(time.monotonic())
    return await _send(self, conn)
reqrep.ClientRequest.send = send
class Stamp:
    def find_spec(self, name, path=None, target=None):
        if name in ("jinja2", "genai_prices") and name not in stamps:
            stamps[name] = time.monotonic()
        return None
stamps = {}
sys.meta_path.insert(0, Stamp())
"""


WAVE = 150
"""Requests in the first wave: enough that writing them takes the loop several turns (with 8,
the old thread, started before them, only ran once they were out)."""


def test_the_ends_imports_start_once_the_first_requests_are_out(tmp_path, monkeypatch):
    """The background threads begin after the first wave of requests is written (ci_evals._util.
    quiet), not beside it, where they held that wave back (issue 41 item 7): the price list
    (no memo yet: genai-prices is imported) and the end's imports; both before the first answer
    comes back."""
    import json

    from tests.fakes.openai_server import FakeOpenAI

    suite = model_suite(tmp_path)
    (tmp_path / "data.jsonl").write_text(
        "".join(json.dumps({"id": i, "input": f"q{i}"}) + "\n" for i in range(WAVE))
    )
    argv = ["run", suite, "--output", str(tmp_path / "o"), "-q", "--no-cache"]
    code = (
        "import sys\n"
        + SENDS
        + "import contextlib, io\nfrom ci_evals.cli.app import main\n"
        + "with contextlib.redirect_stdout(io.StringIO()):\n"
        + f"    code = main({[*argv, '--max-concurrent', str(WAVE)]!r})\n"
        + "import json\nprint(json.dumps([code, sent, stamps]))"
    )
    with FakeOpenAI(latency=1.0) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no price memo yet
        exit_code, sent, stamps = json.loads(printed_by(code)[-1])
    assert exit_code == 0
    assert len(sent) == 2 * WAVE  # the answers, then the judge calls
    first_wave, second_wave = sorted(sent)[:WAVE], sorted(sent)[WAVE:]
    assert max(first_wave) < stamps["genai_prices"] < min(second_wave) - 0.5
    assert max(first_wave) < stamps["jinja2"] < min(second_wave) - 0.5


def test_a_run_that_waits_on_nothing_starts_no_background_thread(tmp_path):
    first = first_importers(
        ["run", replay_suite(tmp_path), "--output", str(tmp_path / "o"), "-q"], END
    )
    assert first == {"jinja2": "MainThread"}


def waiting_suite(folder, grader: dict) -> str:
    """One sample: a command target that takes 1.5 s (a run that waits), graded by ``grader``."""
    import json

    (folder / "data.jsonl").write_text(
        json.dumps({"id": 1, "input": "q", "ground_truth": "a"}) + "\n"
    )
    (folder / "g.py").write_text(
        "from ci_evals import grader, GradeResult\n\n@grader\n"
        "def g(sample, submission):\n    return GradeResult(score=1.0)\n"
    )
    (folder / "suite.yaml").write_text(
        json.dumps(
            {
                "name": "waits",
                "dataset": "data.jsonl",
                "target": {
                    "kind": "command",
                    "command": [sys.executable, "-c", "import time; time.sleep(1.5); print('a')"],
                },
                "graders": {"g": grader},
                "gate": {"metric_key": "g", "op": "gte", "value": 0.0},
            }
        )
    )
    return str(folder / "suite.yaml")


@pytest.mark.parametrize(
    ("grader", "loads_jinja2"),
    [
        ({"kind": "tool", "function": "exact_match"}, "ci-evals-meanwhile"),
        ({"kind": "tool", "function": "g.py:g"}, "MainThread"),
    ],
    ids=["built-in grader", "the author's grader"],
)
def test_the_ends_imports_wait_for_the_run_once_the_authors_python_is_loaded(
    tmp_path, grader, loads_jinja2
):
    """User code may close descriptors 1 and 2 while a thread of ours reads a module file on one
    of those numbers; that thread's close then hits the next file opened on it (junit.xml's spool,
    seen in CI). With the author's Python loaded, nothing of ours reads files beside it."""
    first = first_importers(
        ["run", waiting_suite(tmp_path, grader), "--output", str(tmp_path / "o"), "-q"], END
    )
    assert first == {"jinja2": loads_jinja2}


def test_a_model_run_with_the_authors_python_loads_the_price_list_and_its_end_itself(
    tmp_path, monkeypatch
):
    """Beside user code no thread of ours reads files (see the test above): the price list
    loads at the first priced call, Jinja2 after the run, both on the main thread."""
    import json

    from tests.fakes.openai_server import FakeOpenAI

    suite = model_suite(tmp_path)
    spec = json.loads((tmp_path / "suite.yaml").read_text())
    spec["graders"]["mine"] = {"kind": "tool", "function": "g.py:g"}
    (tmp_path / "suite.yaml").write_text(json.dumps(spec))
    (tmp_path / "g.py").write_text(
        "from ci_evals import grader, GradeResult\n\n@grader\n"
        "def g(sample, submission):\n    return GradeResult(score=1.0)\n"
    )
    with FakeOpenAI(latency=1.5) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no price memo yet
        first = first_importers(
            ["run", suite, "--output", str(tmp_path / "o"), "-q", "--no-cache"], END
        )
    assert (tmp_path / "o" / "report.html").is_file()
    assert first == {"aiohttp": "MainThread", "genai_prices": "MainThread", "jinja2": "MainThread"}
