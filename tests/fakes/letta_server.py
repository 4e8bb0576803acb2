"""An in-memory fake of the Letta REST endpoints ci-evals calls, served on 127.0.0.1.

Endpoints (the JSON shapes follow letta-client 1.12.1's types and a Letta 0.16.8 server):

* ``POST /v1/agents/import`` (multipart ``file`` = an .af JSON) -> ``{"agent_ids": [...]}``
* ``POST /v1/agents/`` (AgentCreate JSON: name, memory_blocks, model...) -> AgentState
* ``GET|PATCH|DELETE /v1/agents/{id}`` -> AgentState / deletion message
* ``POST /v1/agents/{id}/messages`` -> LettaResponse ``{messages, stop_reason, usage}``
* ``GET /v1/agents/{id}/core-memory/blocks`` (``after`` cursor) and
  ``PATCH /v1/agents/{id}/core-memory/blocks/{label}``

Agents behave by script: :attr:`FakeLetta.behaviours` maps an agent name to a function
``(fake, agent, text) -> [partial messages]``; without one, an agent holding a tool with ``score``
and ``rationale`` parameters is a judge (it calls that tool with :attr:`FakeLetta.judge_rule`), an
agent with other custom tools calls the first one with the last word of the message, and any other
agent echoes (``ECHO: <text>``). Tool source code from the .af is executed, as the real server
does. An agent with a ``human`` memory block appends each user message to it.

It rejects what a real Letta 0.16.8 server rejects (checked by the real-server tests,
``pytest -m letta_server``): an agent imported from an .af without its system message (no
``messages`` or no ``in_context_message_ids``, as hand-written files have) answers every message
with HTTP 500 ``An unknown error occurred`` (the server logs "has no in-context messages"); an
imported agent is named ``<name>_copy`` unless ``override_name`` is given, and
``override_model_handle`` sets its model. A deadlocked concurrent import, which the real server
returns as HTTP 400 ``Import failed: … deadlock detected``, is injected with
:meth:`FakeLetta.deadlock_imports`.

Faults are injected with :meth:`FakeLetta.fail` (an HTTP status or a hang); counters
(:attr:`created`, :attr:`deleted`, :meth:`live`) let tests check that no agent is left behind.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
from collections.abc import Callable, Iterator
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

DATE = "2026-01-01T00:00:00Z"
DEADLOCK = (
    "Import failed: (sqlalchemy.dialects.postgresql.asyncpg.Error) deadlock detected\n"
    "[SQL: INSERT INTO tools_agents (agent_id, tool_id) VALUES ($1::VARCHAR, $2::VARCHAR)]"
)

Behaviour = Callable[["FakeLetta", dict[str, Any], str], list[dict[str, Any]]]


# -- message builders used by behaviours ------------------------------------------------------


def assistant(text: str) -> dict[str, Any]:
    return {"message_type": "assistant_message", "content": text}


def reasoning(text: str) -> dict[str, Any]:
    return {"message_type": "reasoning_message", "reasoning": text, "source": "non_reasoner_model"}


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    call = {"name": name, "arguments": args, "tool_call_id": call_id}
    return {"message_type": "tool_call_message", "tool_call": call, "tool_calls": [call]}


def tool_return(call_id: str, value: str, status: str = "success") -> dict[str, Any]:
    ret = {
        "tool_call_id": call_id,
        "status": status,
        "tool_return": value,
        "stdout": None,
        "stderr": None,
        "type": "tool",
    }
    return {
        "message_type": "tool_return_message",
        "tool_call_id": call_id,
        "status": status,
        "tool_return": value,
        "stdout": None,
        "stderr": None,
        "tool_returns": [ret],
    }


def default_judge_rule(text: str) -> tuple[Any, str]:
    """``score=X`` in the message wins; else 1.0 when the expected answer is in the response."""
    m = re.search(r"score=(-?[0-9.]+)", text)
    if m:
        return float(m.group(1)), f"found score={m.group(1)}"
    exp = re.search(r"Expected answer: (.*)", text) or re.search(
        r"## Expected Answer.*\n(.*)", text
    )
    got = re.search(r"Agent response: (.*)", text) or re.search(
        r"## The Agent's Submission.*\n(.*)", text
    )
    if exp and got:
        ok = exp.group(1).strip().lower() in got.group(1).lower()
        return (1.0 if ok else 0.0), (
            "the response has the expected answer" if ok else "wrong answer"
        )
    return 0.0, "nothing to compare"


# -- the fake ---------------------------------------------------------------------------------


class FakeLetta:
    """The server state plus the knobs tests turn."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.agents: dict[str, dict[str, Any]] = {}
        self.created: list[str] = []  # agents created through the API (import or create)
        self.deleted: list[str] = []
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self.headers: list[dict[str, str]] = []
        self.imports: list[dict[str, str]] = []  # the form fields of each import (without the file)
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.sent: list[tuple[str, str]] = []  # (agent id, user text)
        self.behaviours: dict[str, Behaviour] = {}
        self.judge_rule: Callable[[str], tuple[Any, str]] = default_judge_rule
        self.stop_reason = "end_turn"
        self._faults: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.url = ""

    # knobs

    def fail(
        self,
        method: str,
        path: str,
        *,
        status: int | None = 500,
        times: int = 1,
        hang: float | None = None,
        detail: str = "injected fault",
        echo: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        """The next ``times`` requests matching ``method`` and the ``path`` regex get ``status``
        with ``{"detail": detail}`` (after hanging ``hang`` seconds, when given; ``status=None``: the
        real answer, only late); with ``echo`` the
        detail repeats the request's headers, credentials included, as some proxies and gateways do;
        ``headers`` are sent with the fault's answer (a ``Retry-After``)."""
        self._faults.append(
            {
                "method": method,
                "path": re.compile(path),
                "status": status,
                "times": times,
                "hang": hang,
                "detail": detail,
                "echo": echo,
                "headers": dict(headers or {}),
            }
        )

    def deadlock_imports(self, times: int = 1) -> None:
        """The next ``times`` imports fail as a real server's deadlocked import does."""
        self.fail("POST", "/v1/agents/import", status=400, times=times, detail=DEADLOCK)

    def add_agent(
        self,
        name: str = "existing",
        *,
        blocks: dict[str, str] | None = None,
        model: str = "openai/gpt-4o-mini",
    ) -> str:
        """A pre-existing agent (for ``agent_id`` targets); not counted in :attr:`created`."""
        with self.lock:
            agent = self._new_agent(
                {
                    "name": name,
                    "memory_blocks": [{"label": k, "value": v} for k, v in (blocks or {}).items()],
                },
                [],
                model,
            )
        return agent["id"]

    def live(self) -> list[str]:
        """Agents created through the API that still exist."""
        return [a for a in self.created if a in self.agents]

    def count(self, method: str, pattern: str) -> int:
        return sum(1 for m, p in self.requests if m == method and re.fullmatch(pattern, p))

    # state helpers

    def _id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids):08d}"

    def _new_agent(
        self,
        spec: dict[str, Any],
        tools: list[dict[str, Any]],
        model: str | None,
        *,
        context: bool = True,
        name: str | None = None,
    ) -> dict[str, Any]:
        handle = model or (spec.get("llm_config") or {}).get("handle") or "openai/gpt-4o-mini"
        blocks = [
            {
                "id": self._id("block"),
                "label": b.get("label"),
                "value": b.get("value", ""),
                "limit": b.get("limit", 5000),
                "description": b.get("description"),
            }
            for b in spec.get("memory_blocks") or []
        ]
        agent = {
            "id": self._id("agent"),
            "name": name or spec.get("name") or "agent",
            "source_name": spec.get("name") or "agent",  # behaviours are keyed by the .af's name
            "context": context,  # has its system message (in-context messages)
            "agent_type": spec.get("agent_type") or "letta_v1_agent",
            "system": spec.get("system") or "",
            "tags": list(spec.get("tags") or []),
            "metadata": spec.get("metadata"),
            "sources": [],
            "tools": tools,
            "blocks": blocks,
            "memory": {"blocks": blocks},
            "model": handle,
            "llm_config": {
                "model": handle.split("/", 1)[-1],
                "model_endpoint_type": "openai",
                "context_window": 32000,
                "handle": handle,
            },
            "messages": [],
        }
        self.agents[agent["id"]] = agent
        return agent

    def _import(self, af: dict[str, Any], form: dict[str, str] | None = None) -> list[str]:
        form = form or {}
        tools_by_id = {t.get("id"): t for t in af.get("tools") or []}
        blocks_by_id = {b.get("id"): b for b in af.get("blocks") or []}
        ids = []
        for spec in af["agents"]:
            tools = [
                dict(tools_by_id[t], id=self._id("tool"))
                for t in spec.get("tool_ids") or []
                if t in tools_by_id
            ]
            spec = dict(spec)
            spec["memory_blocks"] = list(spec.get("memory_blocks") or []) + [
                blocks_by_id[b] for b in spec.get("block_ids") or [] if b in blocks_by_id
            ]
            context = bool(spec.get("messages")) and bool(spec.get("in_context_message_ids"))
            name = form.get("override_name") or (
                spec.get("name", "agent")
                + ("" if form.get("append_copy_suffix") == "false" else "_copy")
            )
            agent = self._new_agent(
                spec, tools, form.get("override_model_handle"), context=context, name=name
            )
            self.created.append(agent["id"])
            ids.append(agent["id"])
        return ids

    @staticmethod
    def public(agent: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in agent.items() if k not in ("messages", "source_name", "context")}

    def _respond(self, agent: dict[str, Any], text: str) -> dict[str, Any]:
        agent["messages"].append(text)
        self.sent.append((agent["id"], text))
        for b in agent["blocks"]:
            if b["label"] == "human":
                b["value"] += f"- {text}\n"
        behaviour = (
            self.behaviours.get(agent["name"])
            or self.behaviours.get(agent["source_name"])
            or self._default_behaviour(agent)
        )
        run_id = self._id("run")
        step = 1
        out = []
        for partial in behaviour(self, agent, text):
            msg = {
                "id": self._id("message"),
                "date": DATE,
                "name": None,
                "otid": None,
                "sender_id": None,
                "seq_id": None,
                "is_err": None,
                "run_id": run_id,
                "step_id": f"step-{run_id}-{step}",
            }
            msg.update(partial)
            out.append(msg)
            if partial["message_type"] == "tool_return_message":
                step += 1
        steps = len({m["step_id"] for m in out}) or 1
        usage = {
            "message_type": "usage_statistics",
            "prompt_tokens": 10 * steps,
            "completion_tokens": 5 * steps,
            "total_tokens": 15 * steps,
            "step_count": steps,
            "run_ids": [run_id],
        }
        return {
            "messages": out,
            "stop_reason": {"message_type": "stop_reason", "stop_reason": self.stop_reason},
            "usage": usage,
        }

    def _default_behaviour(self, agent: dict[str, Any]) -> Behaviour:
        custom = [t for t in agent["tools"] if t.get("tool_type", "custom") == "custom"]
        for t in custom:
            props = ((t.get("json_schema") or {}).get("parameters") or {}).get("properties") or {}
            if "score" in props and "rationale" in props:
                return judge_behaviour(t["name"])
        if custom:
            return tool_behaviour(custom[0]["name"])
        return echo

    def run_tool(self, agent: dict[str, Any], name: str, args: dict[str, Any]) -> tuple[str, str]:
        """Execute the tool's Python source with ``args``: (return text, status)."""
        tool = next(t for t in agent["tools"] if t["name"] == name)
        scope: dict[str, Any] = {}
        try:
            exec(tool["source_code"], scope)  # trusted: .af files from the tests and examples
            result = scope[name](**args)
        except Exception as exc:  # the real server reports tool errors as a status
            return f"{type(exc).__name__}: {exc}", "error"
        return (result if isinstance(result, str) else json.dumps(result)), "success"


# -- default behaviours -----------------------------------------------------------------------


def echo(fake: FakeLetta, agent: dict[str, Any], text: str) -> list[dict[str, Any]]:
    return [reasoning(f"The user said: {text}"), assistant(f"ECHO: {text}")]


def tool_behaviour(name: str) -> Behaviour:
    """Call tool ``name`` with the message's last word for each string parameter, then answer."""

    def behave(fake: FakeLetta, agent: dict[str, Any], text: str) -> list[dict[str, Any]]:
        tool = next(t for t in agent["tools"] if t["name"] == name)
        props = ((tool.get("json_schema") or {}).get("parameters") or {}).get("properties") or {}
        words = re.findall(r"[\w'-]+", text)
        args = {p: (words[-1] if words else "") for p in props}
        call_id = fake._id("call")
        value, status = fake.run_tool(agent, name, args)
        return [
            reasoning(f"I should call {name}."),
            tool_call(name, args, call_id),
            tool_return(call_id, value, status),
            assistant(value),
        ]

    return behave


def judge_behaviour(name: str) -> Behaviour:
    """Call the grading tool with ``fake.judge_rule(text)``, then say so."""

    def behave(fake: FakeLetta, agent: dict[str, Any], text: str) -> list[dict[str, Any]]:
        score, rationale = fake.judge_rule(text)
        call_id = fake._id("call")
        args = {"score": score, "rationale": rationale}
        value, status = fake.run_tool(agent, name, args)
        return [
            reasoning("Grading the submission."),
            tool_call(name, args, call_id),
            tool_return(call_id, value, status),
            assistant("Grade submitted."),
        ]

    return behave


# -- HTTP ---------------------------------------------------------------------------------------


def _multipart(content_type: str, body: bytes) -> dict[str, bytes]:
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    msg = BytesParser(policy=policy.HTTP).parsebytes(head + body)
    return {
        part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
        for part in msg.iter_parts()
    }


def _handler(fake: FakeLetta) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms stalls

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                self.close_connection = True

        def _body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def _handle(self, method: str) -> None:
            url = urlsplit(self.path)
            path, query = url.path, parse_qs(url.query)
            body = self._body()
            with fake.lock:
                fake.requests.append((method, path))
                fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                fault = next(
                    (
                        f
                        for f in fake._faults
                        if f["times"] > 0 and f["method"] == method and f["path"].fullmatch(path)
                    ),
                    None,
                )
                if fault:
                    fault["times"] -= 1
            if fault and fault["hang"]:
                fake.stop_event.wait(fault["hang"])
            if fault and fault["status"] is not None:
                detail = fault["detail"]
                if fault.get("echo"):
                    detail += f"; you sent {json.dumps(dict(self.headers.items()))}"
                self._send(fault["status"], {"detail": detail}, fault["headers"])
                return
            with fake.lock:
                status, payload = route(fake, method, path, query, body, self.headers)
            self._send(status, payload)

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

        def do_DELETE(self) -> None:
            self._handle("DELETE")

    return Handler


NOT_FOUND = (404, {"detail": "Not found"})


def route(
    fake: FakeLetta, method: str, path: str, query: dict[str, list[str]], body: bytes, headers: Any
) -> tuple[int, Any]:
    """Dispatch one request against the in-memory state (called under the lock)."""
    if method == "POST" and path == "/v1/agents/import":
        form = _multipart(headers.get("Content-Type", ""), body)
        try:
            af = json.loads(form.pop("file"))
        except (KeyError, ValueError):
            return 422, {"detail": "file must be an agent file (JSON)"}
        fields = {k: v.decode() for k, v in form.items()}
        fake.imports.append(fields)
        return 200, {"agent_ids": fake._import(af, fields)}
    if method == "POST" and path in ("/v1/agents", "/v1/agents/"):
        spec = json.loads(body or b"{}")
        agent = fake._new_agent(spec, [], spec.get("model"))
        fake.created.append(agent["id"])
        return 200, fake.public(agent)
    m = re.fullmatch(r"/v1/agents/([^/]+)(/.*)?", path)
    if not m or m.group(1) not in fake.agents:
        return 404, {"detail": f"Agent {m.group(1) if m else path} not found"}
    agent, rest = fake.agents[m.group(1)], m.group(2) or ""
    data = json.loads(body) if body and method in ("POST", "PATCH") else {}
    if rest == "" and method == "GET":
        return 200, fake.public(agent)
    if rest == "" and method == "DELETE":
        del fake.agents[agent["id"]]
        fake.deleted.append(agent["id"])
        return 200, {"message": f"Agent id={agent['id']} successfully deleted"}
    if rest == "" and method == "PATCH":
        fake.patches.append((agent["id"], data))
        for key in ("name", "system", "tags", "metadata"):
            if key in data:
                agent[key] = data[key]
        if "model" in data:
            agent["model"] = data["model"]
            agent["llm_config"] = dict(
                agent["llm_config"], handle=data["model"], model=data["model"].split("/", 1)[-1]
            )
        return 200, fake.public(agent)
    if rest == "/messages" and method == "POST":
        texts = [msg["content"] for msg in data.get("messages") or [] if msg.get("role") == "user"]
        if len(texts) != 1 or not isinstance(texts[0], str):
            return 422, {"detail": "expected one user message with string content"}
        if not agent["context"]:  # the real server: LettaError "Agent … has no in-context messages"
            return 500, {"detail": "An unknown error occurred"}
        return 200, fake._respond(agent, texts[0])
    if rest == "/core-memory/blocks" and method == "GET":
        blocks = agent["blocks"]
        after = (query.get("after") or [None])[0]
        if after:
            ids = [b["id"] for b in blocks]
            blocks = blocks[ids.index(after) + 1 :] if after in ids else []
        return 200, blocks
    bm = re.fullmatch(r"/core-memory/blocks/([^/]+)", rest)
    if bm and method == "PATCH":
        block = next((b for b in agent["blocks"] if b["label"] == bm.group(1)), None)
        if block is None:
            return 404, {"detail": f"Block with label {bm.group(1)} not found"}
        block.update({k: v for k, v in data.items() if k in ("value", "limit", "description")})
        return 200, block
    return NOT_FOUND


def start_fake() -> tuple[FakeLetta, ThreadingHTTPServer, threading.Thread]:
    """Start a fake on a free 127.0.0.1 port (call :func:`stop_fake` when done)."""
    fake = FakeLetta()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    return fake, server, thread


def stop_fake(fake: FakeLetta, server: ThreadingHTTPServer, thread: threading.Thread) -> None:
    fake.stop_event.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture(name="letta_fake")
def letta_fake_fixture() -> Iterator[FakeLetta]:
    """A running fake Letta server, as the ``letta_fake`` fixture; ``letta_fake.url`` is its base URL.

    Import ``letta_fake_fixture`` into a test module and name the parameter ``letta_fake``.
    """
    fake, server, thread = start_fake()
    try:
        yield fake
    finally:
        stop_fake(fake, server, thread)


# -- agent files for tests ----------------------------------------------------------------------

_JSON_TYPES = {"str": "string", "float": "number", "int": "integer", "bool": "boolean"}


def agent_file(
    name: str = "echo-agent",
    *,
    tools: list[str] = (),
    blocks: dict[str, str] | None = None,
    tool_rules: list[dict[str, Any]] = (),
    agents: int = 1,
    with_messages: bool = True,
) -> dict[str, Any]:
    """A small .af document. ``tools`` are Python sources; each schema comes from the annotations.

    ``with_messages=False`` leaves out the system message, as hand-written files did: a real
    server then fails every message to the agent."""
    import ast

    tool_docs = []
    for i, source in enumerate(tools):
        fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
        props = {
            a.arg: {"type": _JSON_TYPES.get(ast.unparse(a.annotation), "string")}
            for a in fn.args.args
        }
        tool_docs.append(
            {
                "id": f"tool-{i}",
                "name": fn.name,
                "tool_type": "custom",
                "source_type": "python",
                "source_code": source,
                "json_schema": {
                    "name": fn.name,
                    "parameters": {"type": "object", "properties": props, "required": list(props)},
                },
            }
        )
    block_docs = [
        {"id": f"block-{i}", "label": k, "value": v, "limit": 5000}
        for i, (k, v) in enumerate((blocks or {}).items())
    ]
    agent = {
        "id": "agent-0",
        "name": name,
        "agent_type": "letta_v1_agent",
        "system": "You are a test agent.",
        "tool_ids": [t["id"] for t in tool_docs],
        "block_ids": [b["id"] for b in block_docs],
        "tool_rules": list(tool_rules),
        "tags": [],
        "llm_config": {
            "model": "gpt-4o-mini",
            "model_endpoint_type": "openai",
            "context_window": 32000,
            "handle": "openai/gpt-4o-mini",
        },
    }
    if with_messages:  # as a real export carries: the system message, in context
        agent["messages"] = [
            {
                "type": "message",
                "role": "system",
                "id": "message-0",
                "agent_id": "agent-0",
                "content": [{"type": "text", "text": "You are a test agent."}],
            }
        ]
        agent["in_context_message_ids"] = ["message-0"]
    return {
        "agents": [dict(agent, id=f"agent-{i}") for i in range(agents)],
        "groups": [],
        "blocks": block_docs,
        "files": [],
        "sources": [],
        "tools": tool_docs,
        "mcp_servers": [],
        "metadata": {},
        "created_at": DATE,
    }


SUBMIT_GRADE = '''def submit_grade(score: float, rationale: str) -> str:
    """Record a grade."""
    return f"recorded {score}"
'''


def write_agent_file(path: Any, doc: dict[str, Any]) -> Any:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def close_ledger(ledger: Any) -> float:
    """Close an :class:`~ci_evals.letta.agents.AgentLedger` with a client of its server (every
    live agent deleted, or reported); the seconds it took."""
    import asyncio
    import time

    from ci_evals.letta.client import LettaServer, make_client

    async def close() -> float:
        client = make_client(LettaServer(base_url=ledger.base_url))
        t0 = time.monotonic()
        await ledger.close(client)
        took = time.monotonic() - t0
        await client.close()
        return took

    return asyncio.run(close())
