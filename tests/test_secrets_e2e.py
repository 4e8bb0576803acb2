"""One whole action run against local servers that echo every credential back, then a grep of
every output for every secret the run had, and for every 12-character piece of each.

The servers: an agent service (http target) that answers with the request's Authorization
header; an OpenAI-compatible judge whose grades quote the Authorization header, with the LLM
cache on; a judge server that answers 401 reflecting the headers; the fake Letta server, whose
judge rationale quotes the key and whose agent import fails once with the headers echoed; the
fake GitHub that takes the PR comment. The outputs: console (stdout, stderr), results.jsonl,
summary.json, summary.md, junit.xml, the step summary, the step outputs, the posted comment and
every file of the LLM cache.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.fakes.github_server import FakeGitHub
from tests.fakes.github_server import start as start_github
from tests.fakes.letta_server import letta_fake_fixture  # noqa: F401 (fixture)
from tests.fakes.openai_server import FakeOpenAI
from tests.test_secrets import (
    GITHUB_TOKEN,
    LETTA_KEY,
    OPENAI_KEY,
    SECRETS,
    Reflector,
    _action,
    leaks,
    write_case,
)

JUDGE_KEY = "judgekey-SECRET-Rf6Tg9Yh2Uj5"


class EchoAgent:
    """An agent service that answers 200 with the headers it was sent (a careless debug echo)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = f"w0 (debug: Authorization={self.headers.get('Authorization')})".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/agent"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_whole_run_against_echoing_servers_leaks_no_secret_anywhere(tmp_path, letta_fake):
    agent, refl, gh = EchoAgent(), Reflector(401), FakeGitHub(token=GITHUB_TOKEN)
    judge = FakeOpenAI()

    def echo_grade(body: dict[str, Any]) -> str:
        auth = judge.requests[-1].headers.get("authorization")
        return json.dumps({"score": 1.0, "rationale": f"graded; the key was {auth}"})

    judge.responder = echo_grade
    letta_fake.judge_rule = lambda text: (
        1.0,
        f"the key was {letta_fake.headers[-1].get('authorization')}",
    )
    letta_fake.fail("POST", r"/v1/agents/import", status=401, times=1, echo=True)
    github = start_github(gh)
    try:
        with judge:
            suite = write_case(
                tmp_path / "suite",
                {
                    "kind": "http",
                    "url": agent.url,
                    "headers": {"Authorization": {"env": "AGENT_TOKEN", "prefix": "Bearer "}},
                },
                {
                    "judge": {"kind": "rubric", "prompt": "Correct?", "base_url": judge.url},
                    "judge401": {
                        "kind": "rubric",
                        "prompt": "Correct?",
                        "base_url": refl.url("/v1"),
                        "api_key_env": "JUDGE_CREDENTIAL",
                        "max_retries": 0,
                    },
                    "letta": {
                        "kind": "letta_judge",
                        "prompt": "Correct?",
                        "base_url": letta_fake.url,
                    },
                },
                n=2,
            )
            spec = json.loads(suite.read_text())
            spec.update({"cache": "llm-cache", "max_concurrent": 1})
            suite.write_text(json.dumps(spec))
            proc, texts = _action(tmp_path, suite, gh.url, {"JUDGE_CREDENTIAL": JUDGE_KEY})
    finally:
        agent.close()
        refl.close()
        github.shutdown()
        github.server_close()
    assert proc.returncode == 0, texts["stdout"] + texts["stderr"]  # the gate is on the first judge
    # every secret was really sent, and really echoed
    assert OPENAI_KEY in json.dumps([r.headers for r in judge.requests])
    assert JUDGE_KEY in json.dumps(refl.seen)
    assert any(LETTA_KEY in json.dumps(h) for h in letta_fake.headers)
    posted = [r for r in gh.log if r.method == "POST"]
    assert len(posted) == 1 and posted[0].authorization == f"Bearer {GITHUB_TOKEN}"
    texts["PR comment"] = posted[0].body["body"]
    cache_files = sorted((tmp_path / "suite" / "llm-cache").rglob("*.json"))
    assert len(cache_files) == 2
    texts.update({f"cache {p.name}": p.read_text(encoding="utf-8") for p in cache_files})
    # what the run recorded shows the echoes happened, masked
    rows = [json.loads(line) for line in texts["results.jsonl"].splitlines()]
    assert rows[0]["submission"]["judge"] == "w0 (debug: Authorization=Bearer ***)"
    assert rows[0]["grades"]["judge"]["rationale"] == "graded; the key was Bearer ***"
    assert "HTTP 401" in rows[0]["grades"]["judge401"]["error"]
    letta = [r["grades"]["letta"] for r in rows]
    assert [g["error"] is None for g in letta].count(False) == 1
    assert "Letta returned HTTP 401" in next(g["error"] for g in letta if g["error"])
    assert next(g["rationale"] for g in letta if not g["error"]) == "the key was Bearer ***"
    assert not leaks(texts, SECRETS + (JUDGE_KEY,)), leaks(texts, SECRETS + (JUDGE_KEY,))
    assert set(texts) >= {
        "stdout",
        "stderr",
        "step summary",
        "outputs",
        "results.jsonl",
        "summary.json",
        "summary.md",
        "junit.xml",
        "PR comment",
    }
    assert Path(tmp_path / "out" / "summary.json").exists()
