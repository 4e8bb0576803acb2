"""report.html's template, compiled once and kept between runs (reports/html.cache_dir)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests import reportdata as rd

# One process = one run: writes report.html for FOLDER; with NO_COMPILE, compiling the template
# is an error (so the page must come from the cache).
RENDER = """
import json, os, sys
from pathlib import Path
import jinja2
if os.environ.get("NO_COMPILE"):
    def refuse(*a, **k):
        raise AssertionError("compiled")
    jinja2.Environment.compile = refuse
from ci_evals.reports import html
folder = Path(os.environ["FOLDER"])
sys.stdout.write(html.render_report(json.loads((folder / "summary.json").read_text()), folder / "results.jsonl"))
"""


def render(
    cache: Path | str, folder: Path, no_compile: bool = False, **env_cwd
) -> subprocess.CompletedProcess:
    cwd = env_cwd.pop("cwd", None)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "FOLDER": str(folder), **env_cwd}
    env.pop("NO_COMPILE", None)
    if no_compile:
        env["NO_COMPILE"] = "1"
    return subprocess.run(
        [sys.executable, "-c", RENDER],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_the_second_run_loads_the_compiled_page_and_writes_the_same_text(tmp_path):
    folder = rd.write_folder(tmp_path / "run", rd.summary(), rd.records())
    cache = tmp_path / "cache"
    first = render(cache, folder)
    assert first.returncode == 0, first.stderr
    (entry,) = (cache / "ci-evals" / "templates").iterdir()
    assert entry.name.startswith("report-") and entry.name.endswith(".cache")
    assert (os.stat(cache / "ci-evals" / "templates").st_mode & 0o777) == 0o700
    second = render(cache, folder, no_compile=True)
    assert (second.returncode, second.stdout) == (0, first.stdout)
    assert render(tmp_path / "empty", folder, no_compile=True).returncode != 0  # the check can fail


def test_a_damaged_entry_is_compiled_again_and_rewritten(tmp_path):
    folder = rd.write_folder(tmp_path / "run", rd.summary(), rd.records())
    cache = tmp_path / "cache"
    first = render(cache, folder)
    (entry,) = (cache / "ci-evals" / "templates").iterdir()
    good = entry.read_bytes()
    entry.write_bytes(good[: len(good) // 2])  # a run killed while another wrote it, a full disk
    again = render(cache, folder)
    assert (again.returncode, again.stdout) == (0, first.stdout)
    assert entry.read_bytes() == good
    assert render(cache, folder, no_compile=True).stdout == first.stdout


def test_a_folder_others_may_write_to_is_not_used(tmp_path):
    folder = rd.write_folder(tmp_path / "run", rd.summary(), rd.records())
    cache = tmp_path / "cache"
    shared = cache / "ci-evals" / "templates"
    shared.mkdir(parents=True)
    shared.chmod(0o777)  # anyone could put code here for the next run to execute
    done = render(cache, folder)
    assert done.returncode == 0, done.stderr
    assert list(shared.iterdir()) == []
    assert render(cache, folder, no_compile=True).returncode != 0


def test_a_relative_cache_home_is_ignored_and_nothing_is_made_in_the_current_folder(tmp_path):
    folder = rd.write_folder(tmp_path / "run", rd.summary(), rd.records())
    (tmp_path / "work").mkdir()
    done = render("rel/cache", folder, cwd=tmp_path / "work", HOME=str(tmp_path / "home"))
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "work").iterdir()) == []
    assert len(list((tmp_path / "home" / ".cache" / "ci-evals" / "templates").iterdir())) == 1
    none = render(
        "", folder, cwd=tmp_path / "work", HOME="nohome"
    )  # no absolute place at all: compiled
    assert (none.returncode, none.stdout) == (0, done.stdout)
    assert list((tmp_path / "work").iterdir()) == []
