"""The browser tests say why Playwright's driver cannot start (issue 25: a bare error before)."""

from __future__ import annotations

from pathlib import Path

from tests.browser_driver import driver_problem


def fake_node(tmp_path: Path, stderr: str, code: int) -> str:
    node = tmp_path / "node"
    node.write_text(f"#!/bin/sh\necho '{stderr}' >&2\nexit {code}\n", encoding="utf-8")
    node.chmod(0o755)
    return str(node)


def test_a_missing_libatomic_names_the_library_the_package_and_the_script(tmp_path):
    node = fake_node(
        tmp_path,
        f"{tmp_path}/node: error while loading shared libraries: libatomic.so.1: "
        "cannot open shared object file: No such file or directory",
        127,
    )
    assert driver_problem(node) == (
        f"Playwright's driver {node} cannot start: libatomic.so.1 is missing; install the Debian package "
        "libatomic1: run `bash scripts/install-chromium.sh` (it installs Debian's chromium and libatomic1)"
    )


def test_an_unknown_missing_library_says_how_to_find_its_package(tmp_path):
    node = fake_node(
        tmp_path,
        "node: error while loading shared libraries: libfoo.so.9: cannot open shared "
        "object file: No such file or directory",
        127,
    )
    assert driver_problem(node) == (
        f"Playwright's driver {node} cannot start: libfoo.so.9 is missing; install the package that ships "
        "it (apt-file search libfoo.so.9): run `bash scripts/install-chromium.sh` (it installs Debian's "
        "chromium and libatomic1)"
    )


def test_another_failure_gives_its_first_line_and_a_missing_binary_says_so(tmp_path):
    node = fake_node(tmp_path, "Illegal instruction", 132)
    assert driver_problem(node) == f"Playwright's driver {node} cannot start: Illegal instruction"
    gone = str(tmp_path / "nothing")
    assert driver_problem(gone) == (
        f"Playwright's driver {gone} cannot start: No such file or directory; "
        "reinstall the test extras (pip install '.[test]')"
    )


def test_a_driver_that_starts_is_no_problem(tmp_path):
    assert driver_problem(fake_node(tmp_path, "", 0)) is None
