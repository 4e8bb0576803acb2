"""scripts/warm-bytecode.py: the image's last build step writes the bytecode of every module a run
of any built-in kind imports (the image runs with PYTHONDONTWRITEBYTECODE=1 in a new container,
so a module without it compiles on every run); its ``--check`` runs in the smoke test."""

from __future__ import annotations

import importlib.util
import py_compile
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "warm-bytecode.py"


def _warm():
    spec = importlib.util.spec_from_file_location("warm_bytecode", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_third_party_import_statement_is_found_wherever_it_stands(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text(
        "import os, json\n"
        "from . import b\n"
        "from ci_evals.results import records\n"
        "import aiohttp\n"
        "def later():\n"
        "    from nltk.translate.meteor_score import meteor_score\n"
        "    import google.genai as genai\n"
        "    from openai import DefaultAioHttpClient, AsyncOpenAI\n"
        "    from collections.abc import Mapping\n"
    )
    (pkg / "b.py").write_text("class C:\n    def m(self):\n        import letta_client\n")
    assert _warm().third_party_imports(pkg) == {
        ("aiohttp", ()),
        ("nltk.translate.meteor_score", ("meteor_score",)),
        ("google.genai", ()),
        ("openai", ("DefaultAioHttpClient", "AsyncOpenAI")),
        ("letta_client", ()),
    }


def test_the_scan_of_ci_evals_finds_each_kinds_libraries():
    found = {m.split(".")[0] for m, _ in _warm().third_party_imports(ROOT / "src" / "ci_evals")}
    assert {
        "aiohttp",
        "letta_client",
        "anthropic",
        "google",
        "nltk",
        "rouge_score",
        "rapidfuzz",
        "httpx",
        "jinja2",
        "pydantic",
        "yaml",
    } <= found
    assert not {"ci_evals", "os", "asyncio", "json"} & found


def test_a_from_import_reads_the_name_or_imports_the_submodule(tmp_path, monkeypatch):
    pkg = tmp_path / "warmpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("VALUE = 1\n")
    (pkg / "sub.py").write_text("X = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    warm = _warm()
    warm.run_import("warmpkg", ("VALUE", "sub"))
    assert sys.modules["warmpkg.sub"].X == 2
    try:
        warm.run_import("warmpkg", ("nothing",))
    except ModuleNotFoundError as exc:
        assert exc.name == "warmpkg.nothing"
    else:
        raise AssertionError("an unknown name must fail, as the statement would")
    for name in ("warmpkg", "warmpkg.sub"):
        sys.modules.pop(name, None)


def test_a_module_imported_without_its_bytecode_is_named(tmp_path, monkeypatch):
    (tmp_path / "nopyc_mod.py").write_text("Y = 1\n")
    (tmp_path / "haspyc_mod.py").write_text("Z = 1\n")
    py_compile.compile(str(tmp_path / "haspyc_mod.py"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    try:
        import haspyc_mod  # noqa: F401
        import nopyc_mod  # noqa: F401

        missing = _warm().missing_bytecode()
    finally:
        sys.modules.pop("nopyc_mod", None)
        sys.modules.pop("haspyc_mod", None)
    assert "nopyc_mod" in missing
    assert "haspyc_mod" not in missing


def test_the_image_build_runs_it_and_checks_it():
    docker = (ROOT / "Dockerfile").read_text()
    assert "COPY scripts/warm-bytecode.py /tmp/" in docker
    assert "/opt/ci-evals/bin/python /tmp/warm-bytecode.py; \\" in docker
    assert "!scripts/warm-bytecode.py" in (ROOT / ".dockerignore").read_text().splitlines()
    smoke = (ROOT / "scripts" / "container-smoke.sh").read_text()
    assert "/warm-bytecode.py --check" in smoke
