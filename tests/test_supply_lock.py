"""Issue 41: the hashed locks, the pinned base image, Dependabot, deptry's configuration.

The locks (scripts/lock.sh) pin every runtime dependency with the sha256 of its files and agree
with pyproject.toml's ranges; the Docker build installs from the lock with --require-hashes; the
base image is pinned by digest, with the tag beside it, and the FROM line Dependabot updates is
the same reference as BASE_IMAGE's default; users who pip install still get ranges.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
DIGEST = re.compile(r"^python:3\.12-slim@sha256:[0-9a-f]{64}$")


def pins(path: Path) -> dict[str, list[tuple[Version, str, list[str]]]]:
    """name -> [(version, marker, hashes)] of a uv/pip-compile requirements file."""
    out: dict[str, list[tuple[Version, str, list[str]]]] = {}
    text = path.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        spec, _, rest = line.partition(" --hash")
        req = Requirement(spec.strip())
        (pinned,) = req.specifier
        assert pinned.operator == "==", line
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
        out.setdefault(canonicalize_name(req.name), []).append(
            (Version(pinned.version), str(req.marker or ""), hashes)
        )
    return out


@pytest.mark.parametrize(
    ("lock", "extras"),
    [
        ("requirements-lock.txt", ["anthropic", "google", "text"]),
        ("requirements-test-lock.txt", ["anthropic", "google", "text", "test"]),
    ],
)
def test_each_lock_pins_every_dependency_with_hashes_inside_pyprojects_ranges(lock, extras):
    locked = pins(ROOT / lock)
    assert len(locked) > 40
    for name, entries in locked.items():
        for _version, _marker, hashes in entries:
            assert hashes, f"{lock}: {name} has no --hash"
    wanted = PROJECT["dependencies"] + [
        r for e in extras for r in EXTRAS[e] if not r.startswith("ci-evals[")
    ]
    for python in ("3.11", "3.12"):
        env = {"python_version": python, "python_full_version": f"{python}.0"}
        for raw in wanted:
            req = Requirement(raw)
            chosen = [
                v
                for v, marker, _ in locked[canonicalize_name(req.name)]
                if not marker or Marker(marker).evaluate(env)
            ]
            assert len(chosen) == 1, (lock, raw, python)
            assert req.specifier.contains(chosen[0], prereleases=True), (
                f"{lock}: {raw} locked at {chosen[0]}"
            )


def test_the_image_lock_is_the_test_locks_runtime_part():
    runtime, test = pins(ROOT / "requirements-lock.txt"), pins(ROOT / "requirements-test-lock.txt")
    for name, entries in runtime.items():
        assert [(v, m) for v, m, _ in test[name]] == [(v, m) for v, m, _ in entries], name


def test_users_still_get_ranges_and_the_text_libraries_are_an_extra():
    for raw in PROJECT["dependencies"]:
        assert not any(s.operator == "==" for s in Requirement(raw).specifier), raw
    core = {canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]}
    assert {"aiohttp", "markupsafe", "rapidfuzz"} <= core
    assert not {"rouge-score", "nltk"} & core
    assert {canonicalize_name(Requirement(r).name) for r in EXTRAS["text"]} == {
        "rouge-score",
        "nltk",
    }
    assert "ci-evals[text]" in EXTRAS["test"]


def test_the_docker_build_installs_the_lock_with_hashes_on_a_base_pinned_by_digest():
    docker = (ROOT / "Dockerfile").read_text()
    (default,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", docker, re.M)
    assert DIGEST.match(default), default
    froms = re.findall(r"^FROM (\S+)", docker, re.M)
    # Dependabot updates the first FROM line only (never an ARG): it must stay BASE_IMAGE's default.
    assert froms[0] == default, (
        "copy the digest Dependabot wrote on the first FROM line to ARG BASE_IMAGE"
    )
    assert all(f in (default, "${BASE_IMAGE}", "scratch") for f in froms), froms
    assert "pip install --no-compile --require-hashes -r requirements-lock.txt" in docker
    assert "COPY requirements-lock.txt ./" in docker
    assert "!requirements-lock.txt" in (ROOT / ".dockerignore").read_text().splitlines()


def test_dependabot_proposes_pip_docker_and_actions_updates():
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())
    assert config["version"] == 2
    assert {u["package-ecosystem"] for u in config["updates"]} == {
        "pip",
        "docker",
        "github-actions",
    }
    assert all(u["directory"] == "/" and u["schedule"]["interval"] for u in config["updates"])


def test_deptry_checks_src_with_the_test_extra_as_tools():
    deptry = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["deptry"]
    assert deptry["optional_dependencies_dev_groups"] == ["test"]
    run = (ROOT / ".ci" / "run").read_text()
    assert "deptry src" in run and "bash scripts/lock.sh --check" in run
    assert "--require-hashes -r requirements-test-lock.txt" in run
    assert "--resolution lowest-direct" in run
