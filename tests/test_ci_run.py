""".ci/run fails closed although its steps run at once: every step's failure fails the run.

.ci/run is copied into a stub checkout whose scripts and Python are stand-ins that log what they
were asked and exit as told (FAKE_* variables), so the orchestration itself is tested in seconds:
which steps ran, against which Letta server, the run's exit code and "FAILED:" line, and that both
Letta servers are stopped in every case, also on SIGINT/SIGTERM (which end every running step).
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LOGGED = '#!/bin/bash\necho "{name} $*" >> "$FAKE_LOG"\n'
SCRIPTS = {
    "fresh-debian.sh": 'echo "fresh-debian start" >> "$FAKE_LOG"; sleep "${FAKE_FRESH_S:-0}"\n'
    'echo "fresh-debian end" >> "$FAKE_LOG"; exit "${FAKE_FRESH_RC:-0}"\n',
    "container-smoke.sh": 'echo "container-smoke" >> "$FAKE_LOG"; exit "${FAKE_CONTAINER_RC:-0}"\n',
    "letta-server.sh": "p=${CI_EVALS_LETTA_PORT:-8283}\ncase $1 in\n"
    '  start) echo "start $p venv=${CI_EVALS_LETTA_VENV:-default}" >> "$FAKE_LOG"\n'
    '         [ "$p" != "${FAKE_START_FAIL:-none}" ] ;;\n'
    '  stop) echo "stop $p" >> "$FAKE_LOG" ;;\n'
    '  env) echo "export LETTA_BASE_URL=http://127.0.0.1:$p" ;;\nesac\n',
}
# The stand-in for python: `-m venv DIR` makes a venv of stand-ins, pip logs, pytest logs its marker.
FAKE_PYTHON = r"""#!/bin/bash
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin"; ln -s "$0" "$3/bin/python"; ln -s "$0" "$3/bin/pip"
  tools="ruff lint-imports check-jsonschema actionlint ci-evals deptry mypy"
  case $3 in */venv) tools="$tools uv" ;; esac  # uv: the test extra's, in the host venv only
  for t in $tools; do
    printf '#!/bin/bash\necho "%s $*" >> "$FAKE_LOG"\n' "$t" > "$3/bin/$t"; chmod +x "$3/bin/$t"; done
  case $3 in */lc/venv) printf '#!/bin/bash\n' > "$3/bin/letta"; chmod +x "$3/bin/letta" ;; esac  # Letta Code's CLI
  # as venv's own: the venv active before is deactivated (its bin leaves PATH) first
  printf '%s\n' '[ -z "${_OLD_VIRTUAL_PATH:-}" ] || PATH=$_OLD_VIRTUAL_PATH' \
    '_OLD_VIRTUAL_PATH=$PATH' "PATH=$3/bin:\$PATH" > "$3/bin/activate"; exit 0
fi
if [ "$(basename "$0")" = pip ] || [ "$1 $2" = "-m pip" ]; then
  [ "${*: -1}" != requirements-test-lock.txt ] || sleep "${FAKE_HOST_LOCK_S:-0}"  # the host venv
  echo "pip ${*: -1}" >> "$FAKE_LOG"; [[ "$*" != *"${FAKE_PIP_FAIL:-none}"* ]]; exit
fi
if [ "$1 $2" = "-m pytest" ]; then
  m=${CI_EVALS_DEPS:-$(echo "$*" | grep -o 'letta_[a-z]*' || echo suite)}  # the range tests: newest/lowest
  case $(command -v letta) in */lc/bin/letta) letta="Letta Code's" ;; "") letta=none ;; *) letta=other ;; esac
  echo "pytest $m on ${LETTA_BASE_URL:-none}, letta: $letta, letta-evals: ${CI_EVALS_LETTA_EVALS_05:+set}" >> "$FAKE_LOG"
  [ -z "$CI_EVALS_DEPS" ] || echo "range $m $(echo "$*" | grep -o 'test_[a-z_]*\.py' | tr '\n' ' ')" >> "$FAKE_LOG"
  v="FAKE_RC_$m"; exit "${!v:-0}"
fi
echo "python $*" >> "$FAKE_LOG"
"""


def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    (repo / "scripts").mkdir()
    (repo / ".ci" / "run").write_text((ROOT / ".ci" / "run").read_text())
    (repo / "scripts" / "letta-tools.env").write_text(
        (ROOT / "scripts" / "letta-tools.env").read_text()
    )
    for name in (
        "install-wordnet",
        "install-chromium",
        "install-test-tools",
        "apt-install",
        "debian-base",
        "lock",
    ):
        (repo / "scripts" / f"{name}.sh").write_text(LOGGED.format(name=name))
    for name, body in SCRIPTS.items():
        (repo / "scripts" / name).write_text("#!/bin/bash\n" + body)
    (repo / "bin").mkdir()
    (repo / "bin" / "id").write_text(
        '#!/bin/bash\necho "$FAKE_UID"\n'
    )  # `id -u`: root or not, as the test says
    for fake in (repo / "fakepy", repo / "bin" / "id"):
        if fake.name == "fakepy":
            fake.write_text(FAKE_PYTHON)
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return repo


def start(tmp_path: Path, **fake: str) -> tuple[subprocess.Popen, Path]:
    repo = checkout(tmp_path)
    env = {
        "PATH": f"{repo / 'bin'}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "PYTHON": str(repo / "fakepy"),
        "FAKE_LOG": str(repo / "log"),
        "FAKE_UID": "0",
        **fake,
    }
    proc = subprocess.Popen(
        ["bash", ".ci/run"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # SIGINT as at a terminal, even when this pytest was started with it ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return proc, repo


def run(tmp_path: Path, **fake: str) -> tuple[int, str, list[str]]:
    proc, repo = start(tmp_path, **fake)
    out, _ = proc.communicate(timeout=120)
    return proc.returncode, out, (repo / "log").read_text().splitlines()


def failed_line(out: str) -> str:
    return [
        line for line in out.splitlines() if line.startswith("== FAILED:") or line == "== passed"
    ][-1]


def test_every_step_runs_each_pytest_against_its_server_and_both_servers_stop(tmp_path):
    rc, out, log = run(tmp_path)
    assert (rc, failed_line(out)) == (0, "== passed"), out
    # apt first and alone (one lock), then the rest at once
    assert log[:4] == [
        "install-wordnet ",
        "install-chromium ",
        "install-test-tools ",
        "apt-install redis-server",
    ]
    venv = f"{tmp_path}/.cache/ci-evals-letta/venv"
    assert log.index("start 8283 venv=default") < log.index(
        f"start 8293 venv={venv}"
    )  # the first builds the venv
    assert (
        log.index("debian-base ") < log.index("fresh-debian start") < log.index("fresh-debian end")
    )
    tests = [line for line in log if line.startswith("pytest")]
    assert sorted(tests) == [
        "pytest letta_code on http://127.0.0.1:8293, letta: Letta Code's, letta-evals: ",
        "pytest letta_oracle on http://127.0.0.1:8293, letta: Letta Code's, letta-evals: set",
        "pytest letta_server on http://127.0.0.1:8283, letta: none, letta-evals: ",
        "pytest lowest on none, letta: none, letta-evals: ",
        "pytest lowest on none, letta: none, letta-evals: ",
        "pytest newest on none, letta: none, letta-evals: ",
    ]
    # The lowest step: pydantic's floor (2.10) without the google extra, which needs 2.12.5, then
    # the two files that need google-genai with it; the newest step: all nine at once.
    files = "test_llm_transport.py test_suite_loading.py test_text_similarity.py "
    files += "test_rubric_grader.py test_report_html.py test_letta_target.py test_keepalive.py "
    vendor = "test_vendor_judges.py test_supply_requests.py "
    lowest = [
        re.sub(r"--python \S+ ", "", line)
        for line in log
        if line.startswith("range lowest") or "--resolution lowest-direct" in line
    ]
    assert lowest == [
        "uv pip install -q --resolution lowest-direct .[anthropic,text]",
        "range lowest " + files,
        "uv pip install -q --resolution lowest-direct .[anthropic,google,text]",
        "range lowest " + vendor,
    ]
    assert "range newest " + files + vendor in log
    assert log.index(sorted(tests)[0]) < log.index(sorted(tests)[1])  # Letta Code, then the oracle
    assert (
        "pip requirements-test-lock.txt" in log and "pip check" in log
    )  # the host venv: the hashed lock
    assert any(
        line.startswith("uv pip install -q --python") and "--resolution lowest-direct" in line
        for line in log
    )
    for step in (
        "container-smoke",
        "deptry src",
        "lock --check",
        "ruff check src tests bench scripts",
        "ruff format --check .",
        "lint-imports ",
        "mypy ",
        "python scripts/schemas.py --check",
        "python scripts/arch_check.py --check",
        "actionlint .github/workflows/*.yml docs/workflow-example.yml",
        "python scripts/action_docs.py --check",
        "python bench/run.py --smoke",
    ):
        assert step in log
    assert sum(line.startswith("ci-evals run ") for line in log) == 1  # the quickstart
    assert log[-2:] == ["stop 8283", "stop 8293"]


def test_the_second_server_starts_when_the_first_is_up_not_when_the_host_venv_is(tmp_path):
    rc, out, log = run(tmp_path, FAKE_HOST_LOCK_S="3")
    assert (rc, failed_line(out)) == (0, "== passed"), out
    second = log.index(f"start 8293 venv={tmp_path}/.cache/ci-evals-letta/venv")
    assert (
        log.index("start 8283 venv=default") < second < log.index("pip requirements-test-lock.txt")
    )
    # its tests still wait for the host venv (their pytest is the host venv's)
    assert log.index("pip requirements-test-lock.txt") < log.index(
        "pytest letta_code on http://127.0.0.1:8293, letta: Letta Code's, letta-evals: "
    )


def test_not_root_runs_the_suite_on_the_host_instead_of_the_fresh_root(tmp_path):
    rc, out, log = run(tmp_path, FAKE_UID="1000", FAKE_RC_suite="1")
    assert (rc, failed_line(out)) == (1, "== FAILED: host-tests"), out
    assert "fresh-debian start" not in log and "debian-base " not in log
    assert "pytest suite on none, letta: none, letta-evals: " in log


@pytest.mark.parametrize(
    ("fake", "rc", "line"),
    [
        ({"FAKE_RC_letta_server": "1"}, 1, "== FAILED: letta-server-tests"),
        ({"FAKE_RC_letta_code": "2"}, 2, "== FAILED: letta-code-and-oracle"),
        ({"FAKE_RC_letta_oracle": "5"}, 1, "== FAILED: letta-code-and-oracle"),  # collected nothing
        ({"FAKE_FRESH_RC": "3"}, 3, "== FAILED: fresh-debian"),
        ({"FAKE_CONTAINER_RC": "4"}, 4, "== FAILED: container-smoke"),
        (
            {"FAKE_START_FAIL": "8283"},
            1,
            "== FAILED: letta-server-1 letta-server-tests letta-code-and-oracle",
        ),
        ({"FAKE_START_FAIL": "8293"}, 1, "== FAILED: letta-server-2 letta-code-and-oracle"),
        ({"FAKE_RC_newest": "1"}, 1, "== FAILED: deps-newest"),
        ({"FAKE_RC_lowest": "5"}, 1, "== FAILED: deps-lowest"),  # collected nothing
        (
            {"FAKE_PIP_FAIL": "requirements-test-lock.txt"},
            1,
            "== FAILED: host-venv host-checks deps-newest deps-lowest letta-server-tests letta-code-and-oracle",
        ),
        (
            {"FAKE_PIP_FAIL": "letta-evals==0.18.0"},
            1,
            "== FAILED: oracle-venvs letta-code-and-oracle",
        ),
    ],
    ids=[
        "letta-server",
        "letta-code",
        "oracle-collects-nothing",
        "fresh-root",
        "container",
        "server-1-start",
        "server-2-start",
        "deps-newest",
        "deps-lowest-collects-nothing",
        "host-venv",
        "oracle-venv",
    ],
)
def test_a_failing_step_fails_the_run_and_both_servers_stop(tmp_path, fake, rc, line):
    got, out, log = run(tmp_path, **fake)
    assert (got, failed_line(out)) == (rc, line), out
    assert log.count("stop 8283") >= 1 and log.count("stop 8293") >= 1
    assert log[-2:] == ["stop 8283", "stop 8293"]


@pytest.mark.parametrize(("sig", "rc"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interruption_ends_every_step_and_stops_both_servers(tmp_path, sig, rc):
    proc, repo = start(tmp_path, FAKE_FRESH_S="60")
    log = repo / "log"
    deadline = time.monotonic() + 60
    while (
        "fresh-debian start" not in (log.read_text() if log.exists() else "")
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    lines = log.read_text().splitlines()
    assert proc.returncode == rc
    assert "fresh-debian end" not in lines  # the step was ended, not waited for
    assert lines[-2:] == ["stop 8283", "stop 8293"]
