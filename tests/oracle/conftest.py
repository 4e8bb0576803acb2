"""Fixtures of the letta-evals oracle tests: the real Letta server, a judge LLM, clean-up."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.oracle.harness import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def letta():
    """A letta-client on the real server; agents made during the session (letta-evals 0.5 leaves
    its own on the server: it has no clean-up) are deleted at the end."""
    base = os.environ.get("LETTA_BASE_URL")
    if not base:
        pytest.fail(
            'no Letta server: run scripts/letta-server.sh start && eval "$(scripts/letta-server.sh env)"'
        )
    from tests.fakes.keepalive import sync_letta

    client = sync_letta(base, "ci-evals-oracle")
    assert client.health().version == "0.16.8"
    before = {a.id for a in client.agents.list(limit=1000)}
    yield client
    for agent in client.agents.list(limit=1000):
        if agent.id not in before:
            client.agents.delete(agent_id=agent.id)


@pytest.fixture(scope="session")
def judge_url(tmp_path_factory):
    """tests/fakes/letta_llm.py as the model judges' OpenAI endpoint (both tools' ``OPENAI_BASE_URL``)."""
    port = _free_port()
    log = tmp_path_factory.mktemp("judge") / "judge.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.letta_llm", str(port)],
        cwd=REPO,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"the judge LLM did not start: {log.read_text()}")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("oracle")
