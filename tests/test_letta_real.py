"""The Letta target and judges on a real Letta 0.16.8 server (opt-in: ``pytest -m letta_server``).

Start the server first; ``.ci/run`` does the same::

    scripts/letta-server.sh start && eval "$(scripts/letta-server.sh env)"
    python -m pytest -m letta_server -p no:cacheprovider

The server's LLM is tests/fakes/letta_llm.py, so every figure below is exact. Every test lists the
server's agents before and after and fails if the run left one behind. The last test stops the
server in the middle of a run and starts it again.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.letta_server

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "letta"
SHIPPED = [
    EXAMPLES / "agent-judge" / "capital-agent.af",
    EXAMPLES / "agent-judge" / "judge.af",
    REPO / "src" / "ci_evals" / "data" / "letta_judge.af",
]
BASE = os.environ.get("LETTA_BASE_URL", "")
MODEL = os.environ.get("LETTA_TEST_MODEL", "openai-proxy/gpt-4o-mini")
MODELS = os.environ.get("LETTA_TEST_MODELS", MODEL).split()
LLM = os.environ.get("LETTA_TEST_LLM_URL", "")
EMBEDDING = os.environ.get("LETTA_TEST_EMBEDDING", "openai/text-embedding-3-small")


@pytest.fixture(scope="module")
def client():
    if not BASE:
        pytest.fail(
            'no Letta server: run scripts/letta-server.sh start && eval "$(scripts/letta-server.sh env)"'
        )
    from tests.fakes.keepalive import sync_letta

    c = sync_letta(BASE, "ci-evals-tests")
    assert c.health().version == "0.16.8"
    return c


def agent_ids(client) -> set[str]:
    return {a.id for a in client.agents.list(limit=1000)}


@pytest.fixture
def server(client, request):
    """The client; fails the test if the run left an agent on the server."""
    before = agent_ids(client)
    yield client
    left = agent_ids(client) - before
    for agent_id in left:  # clean up for the next test, then fail
        client.agents.delete(agent_id=agent_id)
    assert left == set(), f"agents left on the server: {sorted(left)}"


def llm_stats() -> dict:
    with urllib.request.urlopen(LLM + "/stats", timeout=10) as r:
        return json.load(r)


def cli(*args: str) -> int:
    from ci_evals.cli.app import main

    return main(list(args))


def copy_examples(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLES, tmp_path / "letta")
    return tmp_path / "letta"


def edit(path: Path, fn) -> None:
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def results(out: Path) -> tuple[dict, list[dict]]:
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return summary, rows


def make_af(client, tmp_path: Path, name: str, **create) -> Path:
    """An .af exported from an agent made on the server (then deleted)."""
    agent = client.agents.create(name=name, model=MODEL, embedding=EMBEDDING, **create)
    try:
        raw = client.agents.export_file(agent_id=agent.id)
    finally:
        client.agents.delete(agent_id=agent.id)
    path = tmp_path / f"{name}.af"
    path.write_text(raw if isinstance(raw, str) else json.dumps(raw))
    return path


def suite_20(client, tmp_path: Path, n: int = 20) -> Path:
    """n samples: an echo agent exported from the server, graded by the shipped judge.af."""
    make_af(
        client,
        tmp_path,
        "echo-agent",
        include_base_tools=False,
        memory_blocks=[{"label": "human", "value": ""}],
    )
    shutil.copy(EXAMPLES / "agent-judge" / "judge.af", tmp_path / "judge.af")
    rows = [
        {"id": f"q{i}", "input": f"question {i}", "ground_truth": f"question {i}"} for i in range(n)
    ]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    suite = {
        "name": "twenty",
        "dataset": "data.jsonl",
        "target": {"kind": "agent", "agent_file": "echo-agent.af", "model_handles": [MODEL]},
        "graders": {
            "judge": {
                "kind": "rubric",
                "agent_file": "judge.af",
                "model": MODEL,
                "prompt": "Does the answer repeat the question?",
                "extractor": "last_assistant",
            }
        },
        "gate": {"metric_key": "judge", "op": "gte", "value": 1.0},
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return tmp_path / "suite.yaml"


# -- every shipped .af ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_af_is_a_real_export_that_answers(server, path):
    doc = json.loads(path.read_text())
    [agent] = doc["agents"]
    assert [m["role"] for m in agent["messages"]] == ["system"]
    assert agent["in_context_message_ids"] == [agent["messages"][0]["id"]]
    resp = server.agents.import_file(
        file=(path.name, path.read_bytes(), "application/json"), override_model_handle=MODEL
    )
    [agent_id] = resp.agent_ids
    text = (
        "What is the capital of France?"
        if path.name == "capital-agent.af"
        else "Grade it: [[score=0.7]]"
    )
    try:
        reply = server.agents.messages.create(
            agent_id=agent_id, messages=[{"role": "user", "content": text}]
        )
    finally:
        server.agents.delete(agent_id=agent_id)
    kinds = [m.message_type for m in reply.messages]
    if path.name == "capital-agent.af":
        assert kinds == ["tool_call_message", "tool_return_message", "assistant_message"]
        assert reply.messages[-1].content == "The capital of France is Paris."
    else:
        call = reply.messages[0].tool_call
        assert (kinds[0], call.name, json.loads(call.arguments)["score"]) == (
            "tool_call_message",
            "submit_grade",
            0.7,
        )


# -- the examples --------------------------------------------------------------------------------


def test_agent_judge_example_with_the_shipped_judge(server, tmp_path):
    ex = copy_examples(tmp_path)
    suite = ex / "agent-judge" / "suite.yaml"
    edit(
        suite,
        lambda d: (
            d["target"].update(model_handles=[MODEL]),
            d["graders"]["agent_judge"].update(model=MODEL),
        ),
    )
    out = tmp_path / "out"
    assert cli("run", str(suite), "--output", str(out), "--quiet") == 0
    summary, rows = results(out)
    assert summary["errors"]["total"] == 0
    assert {k: m["mean"] for k, m in summary["metrics"].items()} == {
        "answer_contains": 0.8,
        "agent_judge": 0.8,
    }
    by_id = {r["sample_id"]: r for r in rows}
    assert by_id["australia"]["submission"]["agent_judge"] == "The capital of Australia is Sydney."
    assert (
        by_id["australia"]["grades"]["agent_judge"]["rationale"]
        == "the submission does not contain 'Canberra'"
    )
    assert {r["target"]["model"] for r in rows} == {MODEL}
    assert "letta" not in summary


def test_letta_evals_05_suite_with_the_built_in_judge_on_two_model_handles(server, tmp_path):
    ex = copy_examples(tmp_path)
    suite = ex / "letta-evals-0.5" / "suite.yaml"
    edit(
        suite,
        lambda d: (
            d["target"].update(model_handles=MODELS),
            d["graders"]["judge"].update(model=MODEL),
        ),
    )
    before = llm_stats()["models"]
    out = tmp_path / "out"
    assert (
        cli(
            "run",
            str(suite),
            "--output",
            str(out),
            "--quiet",
            "--max-samples",
            "2",
            "--num-runs",
            "1",
        )
        == 0
    )
    summary, rows = results(out)
    assert summary["errors"]["total"] == 0
    assert sorted(summary["models"]) == sorted(MODELS)
    assert {k: m["mean"] for k, m in summary["metrics"].items()} == {
        "exact": 1.0,
        "capital_named": 1.0,
        "lookup_args": 1.0,
        "judge": 1.0,
    }
    assert {r["grades"]["judge"]["metadata"]["agent_file"] for r in rows} == {
        "built-in letta_judge.af"
    }
    after = llm_stats()["models"]
    for handle in MODELS:  # the server really called each model
        name = handle.split("/", 1)[1]
        assert after.get(name, 0) > before.get(name, 0), handle


def test_factory_suite_multi_turn_and_memory_block_extractor(server, tmp_path):
    ex = copy_examples(tmp_path)
    data = ex / "letta-evals-0.5" / "dataset-memory.csv"
    rows = list(csv.DictReader(data.open()))
    for row in rows:  # the factory takes the model handle from agent_args
        row["agent_args"] = json.dumps({**json.loads(row["agent_args"]), "model": MODEL})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    data.write_text(buf.getvalue())
    out = tmp_path / "out"
    assert (
        cli(
            "run",
            str(ex / "letta-evals-0.5" / "suite-factory.yaml"),
            "--output",
            str(out),
            "--quiet",
        )
        == 0
    )
    summary, recs = results(out)
    assert (summary["errors"]["total"], summary["metrics"]["remembers_name"]["mean"]) == (0, 1.0)
    assert sorted(r["submission"]["remembers_name"] for r in recs) == [
        "Name: Ada\n",
        "Name: Grace\n",
    ]
    assert [r["target"]["stop_reasons"] for r in recs] == [
        ["end_turn"] * 3
    ] * 2  # one message per turn


def test_agent_args_and_memory_blocks_on_an_af_target_and_kept_agents(server, tmp_path, capsys):
    shutil.copy(EXAMPLES / "agent-judge" / "capital-agent.af", tmp_path)
    row = {
        "id": "peru",
        "input": "What is the capital of Peru?",
        "ground_truth": "Zed",
        "agent_args": {"memory_blocks": {"human": "Name: Zed"}, "tags": ["ci-evals-test"]},
    }
    (tmp_path / "data.jsonl").write_text(json.dumps(row) + "\n")
    suite = {
        "name": "args",
        "dataset": "data.jsonl",
        "target": {
            "kind": "agent",
            "agent_file": "capital-agent.af",
            "model_handles": [MODEL],
            "cleanup": False,
        },
        "graders": {
            "memory": {
                "kind": "tool",
                "function": "contains",
                "extractor": "memory_block",
                "extractor_config": {"block_label": "human"},
            }
        },
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    out = tmp_path / "out"
    assert cli("run", str(tmp_path / "suite.yaml"), "--output", str(out), "--quiet") == 0
    summary, [rec] = results(out)
    agent_id = rec["target"]["agent_id"]
    assert summary["letta"] == {
        "leftover_agents": [],
        "kept_agents": [{"id": agent_id, "name": "capital-agent"}],
        "base_url": BASE,
    }
    state = server.agents.retrieve(
        agent_id=agent_id, include=["agent.tags"]
    )  # tags only when asked
    blocks = {b.label: b.value for b in server.agents.blocks.list(agent_id=agent_id)}
    assert (state.name, state.tags, blocks["human"]) == (
        "capital-agent",
        ["ci-evals-test"],
        "Name: Zed",
    )
    printed = capsys.readouterr().out
    assert (
        f"Letta: 1 agent(s) kept on {BASE} (cleanup: false):\n  {agent_id} (capital-agent)\n"
        in printed
    )
    server.agents.delete(agent_id=agent_id)


def test_agent_id_target_shares_one_agent_and_reports_queue_time(server, tmp_path):
    agent = server.agents.create(
        name="shared-agent", model=MODEL, embedding=EMBEDDING, include_base_tools=False
    )
    try:
        rows = [
            {"id": f"s{i}", "input": f"question {i}", "ground_truth": f"question {i}"}
            for i in range(4)
        ]
        (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        suite = {
            "name": "shared",
            "dataset": "data.jsonl",
            "target": {"kind": "agent", "agent_id": agent.id},
            "graders": {
                "echo": {"kind": "tool", "function": "contains", "extractor": "last_assistant"}
            },
        }
        (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
        out = tmp_path / "out"
        t0 = time.perf_counter()
        assert (
            cli(
                "run",
                str(tmp_path / "suite.yaml"),
                "--output",
                str(out),
                "--quiet",
                "--max-concurrent",
                "4",
            )
            == 0
        )
        wall = time.perf_counter() - t0
        summary, recs = results(out)
        assert (summary["errors"]["total"], summary["metrics"]["echo"]["mean"]) == (0, 1.0)
        assert sum(1 for r in recs if r.get("queued_s", 0) > 0) == 3  # all but the first waited
        assert (
            sum(r["duration_s"] for r in recs) < wall
        )  # own work only: the waits are not counted twice
        sent = [
            m.content
            for m in server.agents.messages.list(agent_id=agent.id, limit=100)
            if m.message_type == "user_message"
        ]
        assert sorted(sent) == [f"question {i}" for i in range(4)]
    finally:
        server.agents.delete(agent_id=agent.id)


def test_a_judge_af_without_submit_grade_fails_before_any_agent_is_made(server, tmp_path, capsys):
    suite = suite_20(server, tmp_path, n=2)
    make_af(server, tmp_path, "no-tool-judge", include_base_tools=False)
    edit(suite, lambda d: d["graders"]["judge"].update(agent_file="no-tool-judge.af"))
    imports = llm_stats()["requests"]
    assert cli("run", str(suite), "--output", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert (
        "Judge tool 'submit_grade' not found in agent file no-tool-judge.af. Available tools: []"
        in err
    )
    assert llm_stats()["requests"] == imports and not (tmp_path / "out" / "summary.json").exists()


SERVER_TOOL = '''def lookup_capital(country: str) -> str:
    """The organisation's own lookup (not the .af's).

    Args:
        country (str): The country.

    Returns:
        str: A marker naming this version.
    """
    return "server version of lookup_capital for " + country
'''


def test_an_af_import_keeps_the_servers_tool_unless_the_suite_overrides(server, tmp_path):
    """letta-evals imports with override_existing_tools=False; so does ci-evals by default."""
    before = {t.id for t in server.tools.list(name="lookup_capital")}
    tool = server.tools.upsert(source_code=SERVER_TOOL)
    try:
        shutil.copy(EXAMPLES / "agent-judge" / "capital-agent.af", tmp_path)
        (tmp_path / "data.jsonl").write_text(
            json.dumps(
                {"id": "peru", "input": "What is the capital of Peru?", "ground_truth": "Lima"}
            )
            + "\n"
        )
        suite = {
            "name": "tools",
            "dataset": "data.jsonl",
            "target": {"kind": "agent", "agent_file": "capital-agent.af", "model_handles": [MODEL]},
            "graders": {
                "out": {
                    "kind": "tool",
                    "function": "contains",
                    "extractor": "tool_output",
                    "extractor_config": {"tool_name": "lookup_capital"},
                }
            },
        }
        (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
        assert (
            cli("run", str(tmp_path / "suite.yaml"), "--output", str(tmp_path / "a"), "--quiet")
            == 0
        )
        _, [rec] = results(tmp_path / "a")
        assert (rec["submission"]["out"], rec["grades"]["out"]["score"]) == (
            "server version of lookup_capital for Peru",
            0.0,
        )
        assert (
            server.tools.retrieve(tool.id).source_code == SERVER_TOOL
        )  # the server's tool is untouched

        edit(tmp_path / "suite.yaml", lambda d: d["target"].update(override_existing_tools=True))
        assert (
            cli("run", str(tmp_path / "suite.yaml"), "--output", str(tmp_path / "b"), "--quiet")
            == 0
        )
        _, [rec] = results(tmp_path / "b")
        assert (rec["submission"]["out"], rec["grades"]["out"]["score"]) == (
            "The capital of Peru is Lima.",
            1.0,
        )
        af_source = json.loads((tmp_path / "capital-agent.af").read_text())["tools"][1][
            "source_code"
        ]
        assert server.tools.retrieve(tool.id).source_code == af_source  # asked for: replaced
    finally:
        if tool.id not in before:
            server.tools.delete(tool.id)
        else:  # it existed before this test: leave it with the .af's source, as the other tests expect
            server.tools.upsert(
                source_code=json.loads((EXAMPLES / "agent-judge" / "capital-agent.af").read_text())[
                    "tools"
                ][1]["source_code"]
            )


def _graded(messages) -> list[tuple]:
    """What a grader sees of a trajectory: each message's type, tool name and text (no ids, no dates)."""
    out = []
    for m in messages:
        d = m.model_dump()
        if d["message_type"] == "user_message":
            continue
        call = d.get("tool_call") or {}
        out.append(
            (
                d["message_type"],
                call.get("name") or d.get("name"),
                d.get("content") or d.get("tool_return") or call.get("arguments"),
            )
        )
    return out


@pytest.mark.parametrize("question", ["What is the capital of Peru?", "Say hello"])
def test_sync_post_and_letta_evals_streaming_send_give_the_same_trajectory(server, question):
    """ci-evals posts synchronously; letta-evals 0.18 streams in the background and reads the run back."""
    data = (EXAMPLES / "agent-judge" / "capital-agent.af").read_bytes()
    ids = [
        server.agents.import_file(
            file=("capital-agent.af", data, "application/json"),
            override_model_handle=MODEL,
            override_existing_tools=False,
        ).agent_ids[0]
        for _ in range(2)
    ]
    try:
        sync = server.agents.messages.create(
            agent_id=ids[0], messages=[{"role": "user", "content": question}]
        )
        stream = server.agents.messages.create(
            agent_id=ids[1],
            messages=[{"role": "user", "content": question}],
            streaming=True,
            background=True,
            stream_tokens=True,
            include_pings=True,
        )
        run_ids = {c.run_id for c in stream if getattr(c, "run_id", None)}
        [run_id] = run_ids
        streamed = list(server.runs.messages.list(run_id))
    finally:
        for agent_id in ids:
            server.agents.delete(agent_id=agent_id)
    assert _graded(sync.messages) == _graded(streamed)
    assert [k for k, _, _ in _graded(streamed)] == [
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
    ]


# -- under load, and when the server goes away -------------------------------------------------------


def test_twenty_samples_with_a_judge_at_concurrency_8_three_times(server, tmp_path):
    suite = suite_20(server, tmp_path)
    report = []
    for repeat in range(3):
        out = tmp_path / f"out{repeat}"
        t0 = time.perf_counter()
        rc = cli("run", str(suite), "--output", str(out), "--quiet", "--max-concurrent", "8")
        summary, rows = results(out)
        report.append(
            {
                "s": round(time.perf_counter() - t0, 1),
                "errors": summary["errors"]["total"],
                "retries": summary["retries"],
            }
        )
        assert (rc, summary["errors"]["total"], summary["metrics"]["judge"]["mean"]) == (
            0,
            0,
            1.0,
        ), report
        assert len(rows) == 20 and "letta" not in summary
    print(f"20 samples + judge at concurrency 8: {report}", file=sys.stderr)


def _sigint_once_an_agent_exists(server, suite: Path, out: Path) -> tuple[dict, list[dict], str]:
    """Run ``suite`` at concurrency 8, SIGINT it once the first agent it makes exists (the other
    samples' agents still being made), and return (summary, rows, stderr) of an exit 130."""
    before = agent_ids(server)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    cmd = [sys.executable, "-m", "ci_evals", "run", str(suite), "--output", str(out), "--quiet"]
    run = subprocess.Popen(
        [*cmd, "--max-concurrent", "8"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not agent_ids(server) - before and time.monotonic() < deadline:
            assert run.poll() is None, "the run ended before any agent was made"
            time.sleep(0.05)
        run.send_signal(signal.SIGINT)
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, stderr
    return *results(out), stderr


def test_ctrl_c_while_agents_are_imported_leaves_none_on_the_server(server, tmp_path):
    """SIGINT once the first agent exists, with the other samples' imports on the wire: those
    imports still answer, and every agent they made is deleted (the ``server`` fixture checks)."""
    summary, rows, stderr = _sigint_once_an_agent_exists(
        server, suite_20(server, tmp_path), tmp_path / "out"
    )
    assert "had not answered" not in stderr
    assert summary["interrupted_by"] == "SIGINT" and len(rows) < 20
    assert not (summary.get("letta") or {}).get("leftover_agents")


def test_ctrl_c_while_agent_scripts_run_leaves_none_on_the_server(server, tmp_path):
    """The same with an ``agent_script`` factory that makes its agent and then sets it up for a
    second: the factories still running at the stop finish, and their agents are deleted too."""
    (tmp_path / "factory.py").write_text(
        "import asyncio\n\n"
        "async def make(client, sample):\n"
        f"    agent = await client.agents.create(name='scripted', model={MODEL!r},\n"
        f"        embedding={EMBEDDING!r}, include_base_tools=False,\n"
        "        memory_blocks=[{'label': 'human', 'value': ''}])\n"
        "    await asyncio.sleep(1.0)  # attaching tools, seeding memory...\n"
        "    return agent.id\n"
    )
    rows = [{"id": f"q{i}", "input": f"question {i}", "ground_truth": "q"} for i in range(20)]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    suite = {
        "name": "scripted",
        "dataset": "data.jsonl",
        "target": {"kind": "agent", "agent_script": "factory.py:make"},
        "graders": {"echo": {"kind": "tool", "function": "contains"}},
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    summary, rows, stderr = _sigint_once_an_agent_exists(
        server, tmp_path / "suite.yaml", tmp_path / "out"
    )
    assert "had not answered" not in stderr
    assert summary["interrupted_by"] == "SIGINT" and len(rows) < 20
    assert not (summary.get("letta") or {}).get("leftover_agents")


def test_a_server_stopped_mid_run_lists_what_it_left_and_nothing_else(client, tmp_path):
    """Last: stops the server while a run is importing, starts it again, and compares."""
    suite = suite_20(client, tmp_path)
    before = agent_ids(client)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ci_evals",
            "run",
            str(suite),
            "--output",
            str(out),
            "--quiet",
            "--max-concurrent",
            "8",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    script = str(REPO / "scripts" / "letta-server.sh")
    try:
        deadline = time.monotonic() + 300
        while (
            len(agent_ids(client) - before) < 4
            and time.monotonic() < deadline
            and run.poll() is None
        ):
            time.sleep(0.2)
        assert run.poll() is None, "the run ended before the server was stopped"
        subprocess.run([script, "stop"], check=True, capture_output=True, timeout=180)
        stdout, stderr = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
        subprocess.run([script, "start"], check=True, capture_output=True, timeout=600)
    summary, rows = results(out)
    assert run.returncode == 1, stderr
    assert summary["errors"]["total"] > 0 and len(rows) == 20
    reported = {a["id"] for a in summary["letta"]["leftover_agents"]}
    assert {a["error"] for a in summary["letta"]["leftover_agents"]} == {
        f"cannot reach the Letta server at {BASE}: nothing listens there (connection refused)"
    }
    left = agent_ids(client) - before
    assert left == reported  # every agent still there is reported, and only those
    [command] = [
        line.split("delete them: ", 1)[1] for line in stdout.splitlines() if "delete them: " in line
    ]
    subprocess.run(["bash", "-c", command], check=True, capture_output=True, timeout=120)
    assert agent_ids(client) == before
