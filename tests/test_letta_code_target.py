"""``kind: letta_code``: validation, the CLI contract (argv, stdin, env, cwd, failures) with a
recording stand-in executable, and end to end with the real Letta Code CLI on a real Letta server."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap

import pytest

from ci_evals.cli.app import main
from tests.fakes.backoff import watch_letta_backoff

# A stand-in for the `letta` CLI: records what it was given, then fails the way it is told to.
RECORDER = textwrap.dedent("""\
    #!{python}
    import json, os, sys
    record = {{"argv": sys.argv[1:], "stdin": sys.stdin.read(), "cwd": os.getcwd(),
              "env": {{k: os.environ.get(k) for k in ("LETTA_BASE_URL", "MEMORY_DIR", "LETTA_MEMORY_DIR", "TEAM")}}}}
    with open({log!r}, "a") as fh:
        fh.write(json.dumps(record) + "\\n")
    print(json.dumps({{"type": "system", "subtype": "init", "agent_id": "agent-x"}}))
    mode = {mode!r}
    if mode == "error":
        print(json.dumps({{"type": "error", "message": "INTERNAL_SERVER_ERROR: model unavailable"}}))
        sys.exit(1)
    if mode == "no-result":
        print(json.dumps({{"type": "result", "subtype": "error", "result": "budget exceeded"}}))
    if mode == "success":
        print(json.dumps({{"type": "result", "subtype": "success", "result": "done"}}))
    """)


def write(sd, target: dict, rows=None, mode: str = "error"):
    log = sd.root / "calls.jsonl"
    exe = sd.root / "bin" / "letta"
    exe.parent.mkdir()
    exe.write_text(RECORDER.format(python=sys.executable, log=str(log), mode=mode))
    exe.chmod(0o755)
    sd.write(
        "dataset.jsonl",
        rows
        or [
            {
                "id": "a",
                "input": ["Edit {pwd}/x.txt", "then stop"],
                "extra_vars": {"env": {"TEAM": "blue"}},
            }
        ],
    )
    sd.suite(
        {
            "name": "lc",
            "dataset": "dataset.jsonl",
            "target": {
                "kind": "letta_code",
                "model_handles": ["openai/gpt-4.1"],
                "base_url": "http://127.0.0.1:9",
                "command": str(exe),
                **target,
            },
            "graders": {
                "done": {"kind": "tool", "function": "contains", "extractor": "last_assistant"}
            },
            "gate": {"metric_key": "done", "op": "gte", "value": 1.0},
        }
    )
    return log


def calls(log) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines()]


def test_cli_gets_letta_evals_argv_stdin_env_and_cwd(sd):
    log = write(sd, {"flags": "--memfs --allowed-tools 'Bash Read'", "working_dir": "work"})
    (sd.root / "work").mkdir()
    assert sd.run() == 1
    [call] = calls(log)
    assert call["argv"] == [
        "--output-format",
        "stream-json",
        "--model",
        "openai/gpt-4.1",
        "--yolo",
        "--new-agent",
        "--memfs",
        "--allowed-tools",
        "Bash Read",
        "-p",
    ]
    assert call["stdin"] == f"Edit {sd.root.resolve()}/x.txt\nthen stop"
    assert call["cwd"] == str((sd.root / "work").resolve())
    assert call["env"] == {
        "LETTA_BASE_URL": "http://127.0.0.1:9",
        "MEMORY_DIR": None,
        "LETTA_MEMORY_DIR": None,
        "TEAM": "blue",
    }


def test_permission_mode_replaces_yolo_and_memory_workspace_sets_the_folder(sd):
    log = write(
        sd, {"permission_mode": "acceptEdits", "memory_workspace": True, "memory_dir": "mem"}
    )
    assert sd.run() == 1
    [call] = calls(log)
    assert call["argv"][4:] == ["--new-agent", "--permission-mode", "acceptEdits", "-p"]
    mem = str(sd.root.resolve() / "mem")
    assert (call["cwd"], call["env"]["MEMORY_DIR"], call["env"]["LETTA_MEMORY_DIR"]) == (
        mem,
        mem,
        mem,
    )


def test_a_failed_cli_run_is_a_target_error_with_its_message_and_retries(sd, monkeypatch):
    watched = watch_letta_backoff(monkeypatch)
    log = write(sd, {"max_retries": 1, "retry_backoff": 0.6})
    assert sd.run() == 1
    # the retry waited as the shared backoff says (equal jitter), not at once
    assert (watched.bounds(), watched.slept) == ([0.6], watched.rng.drawn)
    [rec] = sd.results()
    assert rec["error"]["category"] == "target"
    assert rec["error"]["message"] == (
        "Letta Code run failed after 2 attempts: letta exited with code 1: "
        "INTERNAL_SERVER_ERROR: model unavailable"
    )
    assert len(calls(log)) == 2


def test_a_result_that_is_not_success_fails_the_sample(sd):
    write(sd, {}, mode="no-result")
    assert sd.run() == 1
    assert sd.results()[0]["error"]["message"] == (
        "Letta Code run failed: letta reported no successful result: budget exceeded"
    )


def test_a_server_dripping_the_trace_back_is_a_sample_error_within_the_timeout(sd):
    from tests.test_time_limits import Drip

    server = Drip(json.dumps({"pad": "x" * 100}).encode(), every=0.5)  # 50 s an answer
    try:
        write(sd, {"base_url": server.url, "timeout": 1, "cleanup": False}, mode="success")
        assert sd.run() == 1
    finally:
        server.close()
    [rec] = sd.results()
    assert rec["error"]["message"] == (
        "Letta Code run failed: reading the run back from the Letta server took over 1 s"
    )
    assert rec["duration_s"] < 5, rec["duration_s"]


def test_a_server_paging_on_for_ever_is_a_sample_error_not_a_full_memory(sd, monkeypatch):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from ci_evals.targets import letta_code

    monkeypatch.setattr(letta_code, "MAX_TRACE_MESSAGES", 50)
    page = [
        {"id": f"message-{i}", "message_type": "assistant_message", "content": "again"}
        for i in range(20)
    ]
    pages = []

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # every page full, the same cursor again: it never ends
            pages.append(self.path)
            body = json.dumps(page).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        write(sd, {"base_url": url, "cleanup": False}, mode="success")
        assert sd.run() == 1
    finally:
        httpd.shutdown()
    [rec] = sd.results()
    assert rec["error"]["message"] == (
        "Letta Code run failed: the Letta server listed over 50 messages for one run"
    )
    assert len(pages) == 3  # 20, 40, then 60: past 50 on the third page


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            {"permission_mode": "memory"},
            "target.permission_mode: permission_mode 'memory' was removed from Letta Code; "
            "use memory_workspace: true with a permission_mode such as 'unrestricted'",
        ),
        (
            {"model_handles": []},
            "target.model_handles: List should have at least 1 item after validation, not 0",
        ),
        ({"sandbox": True}, "target.sandbox: unknown key 'sandbox'"),
    ],
)
def test_bad_letta_code_specs_are_one_line(sd, capsys, target, message):
    write(sd, target)
    assert main(["validate", str(sd.root / "suite.yaml")]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"error: {sd.root / 'suite.yaml'}:")
        and f": {message}" in err
        and err.count("\n") == 1
    )


def test_missing_cli_is_a_config_error_naming_the_package(sd, capsys):
    write(sd, {"command": "letta-code-that-is-not-installed"})
    assert sd.run() == 2
    assert capsys.readouterr().err.endswith(
        "target.command: the Letta Code CLI 'letta-code-that-is-not-installed' is not on PATH: "
        "pip install 'letta>=0.32.13'\n"
    )


# --- the real thing -------------------------------------------------------------------------------


@pytest.mark.letta_code
def test_letta_code_end_to_end_on_a_real_letta_server(sd):
    """Opt-in (pytest -m letta_code): a Letta server with Redis, a streaming model and Letta Code."""
    import httpx

    assert (
        os.environ.get("LETTA_BASE_URL")
        and os.environ.get("LETTA_CODE_MODEL")
        and shutil.which("letta")
    ), (
        "needs LETTA_BASE_URL (a Letta server with Redis), LETTA_CODE_MODEL (a handle whose endpoint streams) "
        "and Letta Code's `letta` on PATH; see docs/letta-code.md"
    )

    base = os.environ["LETTA_BASE_URL"].rstrip("/")
    before = {a["id"] for a in httpx.get(f"{base}/v1/agents/", params={"limit": 1000}).json()}
    sd.write(
        "dataset.jsonl",
        [{"id": "sum", "input": "What is 2+2? Answer with just the number.", "ground_truth": "4"}],
    )
    sd.suite(
        {
            "name": "lc",
            "dataset": "dataset.jsonl",
            "target": {
                "kind": "letta_code",
                "model_handles": [os.environ["LETTA_CODE_MODEL"]],
                "timeout": 180,
            },
            "graders": {
                "answer": {"kind": "tool", "function": "contains", "extractor": "last_assistant"}
            },
            "gate": {"metric_key": "answer", "op": "gte", "value": 1.0},
        }
    )
    assert sd.run() == 0
    [rec] = sd.results()
    assert rec["error"] is None and rec["model"] == os.environ["LETTA_CODE_MODEL"]
    assert rec["target"]["agent_id"].startswith("agent-") and rec["target"][
        "conversation_id"
    ].startswith("conv-")
    after = {a["id"] for a in httpx.get(f"{base}/v1/agents/", params={"limit": 1000}).json()}
    assert rec["target"]["agent_id"] not in after and after == before  # the run's agent was deleted


def test_agent_script_agent_is_passed_with_agent_and_the_sample(sd):
    log = write(sd, {"agent_script": "factory.py:make_agent"})
    sd.write(
        "factory.py",
        textwrap.dedent("""\
        from letta_evals.decorators import agent_factory

        @agent_factory
        async def make_agent(client, sample):
            return f"agent-for-{sample.id}"
        """),
    )
    assert sd.run() == 1
    [call] = calls(log)
    assert call["argv"][4:7] == ["--yolo", "--agent", "agent-for-a"]
    assert "--new-agent" not in call["argv"]
