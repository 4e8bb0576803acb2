"""Secrets never leak: API keys and tokens stay out of stdout, stderr, results, summaries, JUnit and
the PR comment, even when a hostile or misconfigured server reflects them in its error replies.

Every run uses distinctive fake secrets; the "reflecting" server answers every request with an error
whose body echoes the request headers (as some gateways and proxies do), so each HTTP client's
error path is exercised with the secret in the response it turns into a message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.github_server import FakeGitHub
from tests.fakes.github_server import start as start_github
from tests.fakes.letta_server import agent_file, write_agent_file
from tests.fakes.openai_server import FakeOpenAI

OPENAI_KEY = "sk-test-SECRET-openai-Qw7Rt2Yp9Lk4Zx"
LETTA_KEY = "letta-SECRET-key-Hb3Nm8Vc1Df6Gj"
GITHUB_TOKEN = "ghs_SECRET_github_Pu5Ie2Wo7Ra9Sd"
AGENT_TOKEN = "agent-SECRET-token-Ty4Ui8Op3As6Df"
URL_PASSWORD = "urlpass-SECRET-Kl2Jh5Gf8"
SECRETS = (OPENAI_KEY, LETTA_KEY, GITHUB_TOKEN, AGENT_TOKEN, URL_PASSWORD)
OUTPUT_FILES = ("results.jsonl", "summary.json", "summary.md", "junit.xml")


class Reflector:
    """A server that answers everything with ``status`` and a body reflecting the request headers."""

    def __init__(self, status: int = 401, echo: Any = None) -> None:
        self.status = status
        self.echo = echo  # headers -> the error text, when a test places the secret itself
        self.seen: list[dict[str, str]] = []
        reflector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                headers = {k: v for k, v in self.headers.items()}
                reflector.seen.append(headers)
                text = (
                    reflector.echo(self.headers)
                    if reflector.echo
                    else f"invalid credentials; you sent {json.dumps(headers)}"
                )
                body = json.dumps(
                    {
                        "error": {"message": text, "type": "invalid_request_error"},
                        "detail": text,
                        "message": text,
                    }
                ).encode()
                self.send_response(reflector.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = do_DELETE = _reply

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def url(self, path: str = "", userinfo: str = "") -> str:
        return f"http://{userinfo}127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def reflector():
    server = Reflector(401)
    yield server
    server.close()


@pytest.fixture
def openai_fake():
    with FakeOpenAI() as server:
        yield server


def env_with(**extra: str) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "LETTA_", "INPUT_", "GITHUB_"))
    }
    base.update(
        {
            "OPENAI_API_KEY": OPENAI_KEY,
            "LETTA_API_KEY": LETTA_KEY,
            "AGENT_TOKEN": AGENT_TOKEN,
            "PYTHONUNBUFFERED": "1",
        }
    )
    base.update(extra)
    return base


def write_case(root: Path, target: dict[str, Any], graders: dict[str, Any], n: int = 3) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rows = [{"id": i, "input": f"Say w{i}", "ground_truth": f"w{i}"} for i in range(n)]
    (root / "dataset.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    suite = {
        "name": "secrets",
        "dataset": "dataset.jsonl",
        "cache": False,
        "target": target,
        "graders": graders,
        "gate": {"op": "gte", "value": 0.5},
    }
    (root / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
    return root / "suite.yaml"


def run_cli(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


WINDOW = 12


def windows(secret: str) -> set[str]:
    """Every 12-character piece of a secret: a part that long is a leak too."""
    return {secret[i : i + WINDOW] for i in range(max(1, len(secret) - WINDOW + 1))}


def leaks(texts: dict[str, str], secrets: tuple[str, ...] = SECRETS) -> list[str]:
    """``where: piece`` for every secret, or 12-character piece of one, found in any of the texts."""
    return [
        f"{where}: {piece}"
        for where, text in texts.items()
        for s in secrets
        for piece in windows(s)
        if piece in text
    ]


def outputs(out: Path) -> dict[str, str]:
    return {name: (out / name).read_text(encoding="utf-8") for name in OUTPUT_FILES}


def run_and_collect(root: Path, env: dict[str, str]) -> tuple[dict[str, str], dict]:
    """``run --dry-run`` (prints the PR comment) and every file it wrote."""
    proc = run_cli(root, env, "run", "suite.yaml", "--output", "out", "--dry-run")
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    texts = {"stdout": proc.stdout, "stderr": proc.stderr, **outputs(root / "out")}
    assert "--- PR comment (dry run: not posted) ---" in proc.stdout
    return texts, json.loads(texts["summary.json"])


def test_openai_key_reflected_by_judge_errors_is_scrubbed(tmp_path, openai_fake, reflector):
    """The target answers (real fake); two judges hit a server echoing the key: 401 (no retry) and 500."""
    failing = Reflector(500)
    try:
        suite_dir = tmp_path / "case"
        write_case(
            suite_dir,
            {"kind": "model", "model": "gpt-4o-mini", "base_url": openai_fake.url},
            {
                "judge401": {
                    "kind": "rubric",
                    "prompt": "Correct?",
                    "base_url": reflector.url("/v1"),
                },
                "judge500": {
                    "type": "score_model",
                    "name": "j",
                    "base_url": failing.url("/v1"),
                    "max_retries": 1,
                    "timeout": 5,
                    "input": [{"role": "user", "content": "Grade {{ sample.output_text }}"}],
                },
            },
        )
        texts, summary = run_and_collect(suite_dir, env_with())
    finally:
        failing.close()
    assert summary["errors"]["by_category"]["grading"] == 6
    assert OPENAI_KEY in json.dumps(reflector.seen) and OPENAI_KEY in json.dumps(
        failing.seen
    )  # it was sent
    assert "HTTP 401" in texts["results.jsonl"] and "HTTP 500" in texts["results.jsonl"]
    assert not leaks(texts), leaks(texts)


def test_openai_key_reflected_to_the_model_target_is_scrubbed(tmp_path, reflector):
    suite_dir = tmp_path / "case"
    write_case(
        suite_dir,
        {"kind": "model", "model": "gpt-4o-mini", "base_url": reflector.url("/v1")},
        {"acc": {"kind": "tool", "function": "contains"}},
    )
    texts, summary = run_and_collect(suite_dir, env_with())
    assert summary["errors"]["by_category"]["target"] == 3
    assert "HTTP 401" in texts["results.jsonl"]
    assert not leaks(texts), leaks(texts)


def test_password_in_the_base_url_is_not_shown(tmp_path):
    """OPENAI_BASE_URL=http://ci:PASSWORD@host/v1 against a server that fails: messages name the host only."""
    failing = Reflector(502)  # a server error (503 would be an overload: waited out up to max_wait)
    try:
        suite_dir = tmp_path / "case"
        write_case(
            suite_dir,
            {"kind": "model", "model": "gpt-4o-mini", "max_retries": 0},
            {"acc": {"kind": "tool", "function": "contains"}},
            n=1,
        )
        env = env_with(OPENAI_BASE_URL=failing.url("/v1", userinfo=f"ci:{URL_PASSWORD}@"))
        texts, summary = run_and_collect(suite_dir, env)
    finally:
        failing.close()
    assert summary["errors"]["by_category"]["target"] == 1
    assert f"127.0.0.1:{failing.port}" in texts["results.jsonl"]
    assert not leaks(texts), leaks(texts)


def test_http_target_header_from_env_is_not_echoed(tmp_path, reflector):
    """An agent service that echoes the Authorization header in its 401 body."""
    suite_dir = tmp_path / "case"
    write_case(
        suite_dir,
        {
            "kind": "http",
            "url": reflector.url("/agent"),
            "headers": {"Authorization": {"env": "AGENT_TOKEN", "prefix": "Bearer "}},
        },
        {"acc": {"kind": "tool", "function": "contains"}},
    )
    texts, summary = run_and_collect(suite_dir, env_with())
    assert reflector.seen[0]["Authorization"] == f"Bearer {AGENT_TOKEN}"
    assert summary["errors"]["by_category"]["target"] == 3
    assert "HTTP target returned 401" in texts["results.jsonl"]
    assert not leaks(texts), leaks(texts)


def test_letta_key_reflected_by_the_server_is_scrubbed(tmp_path, reflector):
    suite_dir = tmp_path / "case"
    suite_dir.mkdir()
    write_agent_file(suite_dir / "agent.af", agent_file("echo-agent"))
    write_case(
        suite_dir,
        {"kind": "agent", "agent_file": "agent.af", "base_url": reflector.url()},
        {"acc": {"kind": "tool", "function": "contains"}},
    )
    texts, summary = run_and_collect(suite_dir, env_with())
    assert any(LETTA_KEY in json.dumps(h) for h in reflector.seen)
    assert summary["errors"]["by_category"]["target"] == 3
    assert "Letta returned HTTP 401" in texts["results.jsonl"]
    assert not leaks(texts), leaks(texts)


def _action(
    tmp_path: Path, suite: Path, api_url: str, env_extra: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 3}}), encoding="utf-8")
    env = env_with(
        **{
            "INPUT_SUITE": str(suite),
            "INPUT_OUTPUT-DIR": str(tmp_path / "out"),
            "INPUT_GITHUB-TOKEN": GITHUB_TOKEN,
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_REPOSITORY": "octo/widgets",
            "GITHUB_API_URL": api_url,
            "GITHUB_STEP_SUMMARY": str(tmp_path / "step.md"),
            "GITHUB_OUTPUT": str(tmp_path / "gh_out.txt"),
            "GITHUB_ACTIONS": "true",
            **(env_extra or {}),
        }
    )
    proc = run_cli(tmp_path, env, "action")
    # ``::add-mask::VALUE`` is how the action tells GitHub to mask a secret: the runner never shows it.
    stdout = "\n".join(ln for ln in proc.stdout.splitlines() if not ln.startswith("::add-mask::"))
    texts = {
        "stdout": stdout,
        "stderr": proc.stderr,
        "step summary": (tmp_path / "step.md").read_text(encoding="utf-8"),
        "outputs": (tmp_path / "gh_out.txt").read_text(encoding="utf-8"),
        **outputs(tmp_path / "out"),
    }
    return proc, texts


def test_action_mode_posts_a_comment_without_any_secret(tmp_path, openai_fake, reflector):
    """Action mode with a GitHub token: the failing judge echoes the OpenAI key, the comment is posted."""
    suite = write_case(
        tmp_path / "suite",
        {"kind": "model", "model": "gpt-4o-mini", "base_url": openai_fake.url},
        {"judge": {"kind": "rubric", "prompt": "Correct?", "base_url": reflector.url("/v1")}},
    )
    gh = FakeGitHub(token=GITHUB_TOKEN)
    server = start_github(gh)
    try:
        proc, texts = _action(tmp_path, suite, gh.url)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 1, proc.stderr
    assert (
        f"::add-mask::{GITHUB_TOKEN}" in proc.stdout and f"::add-mask::{OPENAI_KEY}" in proc.stdout
    )
    posted = [r for r in gh.log if r.method == "POST"]
    assert len(posted) == 1 and posted[0].authorization == f"Bearer {GITHUB_TOKEN}"
    texts["PR comment"] = posted[0].body["body"]
    assert "errored" in texts["PR comment"] and "HTTP 401" in texts["results.jsonl"]
    assert not leaks(texts), leaks(texts)


def test_action_mode_github_error_reflecting_the_token_is_scrubbed(tmp_path, reflector):
    """GitHub (or a proxy in front of it) answering 401 with the token in its message."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "outputs.jsonl").write_text('{"id": 0, "output": "w0"}\n', encoding="utf-8")
    path = write_case(
        suite,
        {"kind": "replay", "outputs": "outputs.jsonl"},
        {"acc": {"kind": "tool", "function": "contains"}},
        n=1,
    )
    proc, texts = _action(tmp_path, path, reflector.url())
    assert proc.returncode == 0, proc.stderr
    assert any(GITHUB_TOKEN in json.dumps(h) for h in reflector.seen)
    assert "could not post the PR comment" in texts["stdout"]
    assert not leaks(texts), leaks(texts)


def test_http_target_secret_split_by_the_cut_is_scrubbed_whole(tmp_path):
    """The body's last 500 characters start inside the token: scrub first, then cut."""
    server = Reflector(401, echo=lambda h: "denied: " + h["X-Agent-Auth"] + "z" * 480)
    try:
        suite_dir = tmp_path / "case"
        write_case(
            suite_dir,
            {
                "kind": "http",
                "url": server.url("/agent"),
                "headers": {"X-Agent-Auth": {"env": "AGENT_TOKEN"}},
            },
            {"acc": {"kind": "tool", "function": "contains"}},
            n=1,
        )
        texts, summary = run_and_collect(suite_dir, env_with())
    finally:
        server.close()
    assert summary["errors"]["by_category"]["target"] == 1
    assert "HTTP target returned 401: …" in texts["results.jsonl"]
    assert not leaks(texts), leaks(texts)


def test_judge_key_split_by_the_cut_is_scrubbed_whole(tmp_path, openai_fake):
    """A key without the ``sk-`` shape, echoed where the message is cut at 300 characters."""
    judge_key = "judgekey-SECRET-Mn4Bv7Cx2Zq9"
    server = Reflector(400, echo=lambda h: "y" * 270 + " you sent " + h["Authorization"])
    try:
        suite_dir = tmp_path / "case"
        write_case(
            suite_dir,
            {"kind": "model", "model": "gpt-4o-mini", "base_url": openai_fake.url},
            {
                "judge": {
                    "kind": "rubric",
                    "prompt": "Correct?",
                    "base_url": server.url("/v1"),
                    "api_key_env": "JUDGE_CREDENTIAL",
                    "max_retries": 0,
                }
            },
            n=1,
        )
        # The reflected headers come first; the key sits near character 300 of the message.
        texts, summary = run_and_collect(suite_dir, env_with(JUDGE_CREDENTIAL=judge_key))
    finally:
        server.close()
    assert summary["errors"]["by_category"]["grading"] == 1
    assert judge_key in json.dumps(server.seen)
    assert not leaks(texts, (judge_key,)), leaks(texts, (judge_key,))


def test_letta_judge_401_echoing_the_key_is_scrubbed(tmp_path, reflector):
    """A Letta server answering the judge's import with a 401 that echoes Authorization."""
    suite_dir = tmp_path / "case"
    suite_dir.mkdir()
    (suite_dir / "outputs.jsonl").write_text('{"id": 0, "output": "w0"}\n', encoding="utf-8")
    write_case(
        suite_dir,
        {"kind": "replay", "outputs": "outputs.jsonl"},
        {"judge": {"kind": "letta_judge", "prompt": "Correct?", "base_url": reflector.url()}},
        n=1,
    )
    texts, summary = run_and_collect(suite_dir, env_with())
    assert any(LETTA_KEY in json.dumps(h) for h in reflector.seen)
    assert summary["errors"]["by_category"]["grading"] == 1
    assert "Letta judge failed: Letta returned HTTP 401" in texts["results.jsonl"]
    assert not leaks(texts), leaks(texts)


SNOOP = r"""
import glob, os, sys
token = os.environ["SNOOP_FOR"].encode()
sys.stdin.read()
found = []
for pid in [os.getppid()]:
    try:
        if token in open(f"/proc/{pid}/environ", "rb").read():
            found.append(f"environ of {pid}")
    except OSError:
        pass
    for fd in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            handle = os.open(fd, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if token in os.read(handle, 1 << 16):
                found.append(f"fd {fd}")
        except OSError:
            pass
        finally:
            os.close(handle)
print("LEAKED " + ", ".join(found) if found else "CLEAN")
"""


def test_user_programs_cannot_read_the_token_through_proc(tmp_path):
    """A command target reads /proc/<parent>/environ and the parent's open pipes: no token there."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "snoop.py").write_text(SNOOP, encoding="utf-8")
    path = write_case(
        suite,
        {
            "kind": "command",
            "command": [sys.executable, "snoop.py"],
            "env": {"SNOOP_FOR": GITHUB_TOKEN[4:]},
        },
        {"clean": {"kind": "tool", "function": "exact_match"}},
        n=1,
    )
    rows = [{"id": 0, "input": "x", "ground_truth": "CLEAN"}]
    (suite / "dataset.jsonl").write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    proc, texts = _action(tmp_path, path, "http://127.0.0.1:9", {"INPUT_COMMENT": "never"})
    record = json.loads(texts["results.jsonl"])
    assert record["submission"]["clean"] == "CLEAN", record
    assert proc.returncode == 0, texts["stdout"]


def test_in_process_user_code_sees_no_token_in_its_environment(tmp_path):
    """A custom grader runs inside ci-evals: neither os.environ nor /proc/self/environ holds the token."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "outputs.jsonl").write_text('{"id": 0, "output": "w0"}\n', encoding="utf-8")
    (suite / "g.py").write_text(
        "import os\nfrom ci_evals import grader, GradeResult\n\n@grader\ndef env_dump(sample, submission):\n"
        f"    token = {GITHUB_TOKEN[4:]!r}\n"
        "    raw = open('/proc/self/environ', 'rb').read().decode()\n"
        "    seen = [k for k, v in os.environ.items() if token in v] + (['/proc'] if token in raw else [])\n"
        "    return GradeResult(score=0.0 if seen else 1.0, rationale='seen in ' + repr(seen))\n",
        encoding="utf-8",
    )
    path = write_case(
        suite,
        {"kind": "replay", "outputs": "outputs.jsonl"},
        {"env": {"kind": "tool", "function": "g.py:env_dump"}},
        n=1,
    )
    proc, texts = _action(
        tmp_path,
        path,
        "http://127.0.0.1:9",
        {"INPUT_COMMENT": "never", "GITHUB_TOKEN": GITHUB_TOKEN},
    )
    assert json.loads(texts["results.jsonl"])["grades"]["env"]["rationale"] == "seen in []"
    assert proc.returncode == 0, texts["stdout"]


def test_python_grader_output_cut_inside_a_secret_is_scrubbed_whole(tmp_path):
    """The grader prints a key (read from a file, say) followed by 1,990 characters: the kept last
    2,000 start inside the key."""
    suite_dir = tmp_path / "case"
    suite_dir.mkdir()
    (suite_dir / "outputs.jsonl").write_text('{"id": 0, "output": "w0"}\n', encoding="utf-8")
    source = f"def grade(sample, item):\n    print({OPENAI_KEY!r} + 'y' * 1990)\n    return 1.0\n"
    write_case(
        suite_dir,
        {"kind": "replay", "outputs": "outputs.jsonl"},
        {"py": {"type": "python", "name": "py", "source": source}},
        n=1,
    )
    texts, summary = run_and_collect(suite_dir, env_with())
    meta = json.loads(texts["results.jsonl"])["grades"]["py"]["metadata"]
    assert meta["output"] == "***" + "y" * 1990 + "\n"
    assert not leaks(texts), leaks(texts)
