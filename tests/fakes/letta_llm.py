"""The OpenAI-compatible LLM behind the real Letta server of the tests (stdlib only, no pytest).

``scripts/letta-server.sh`` runs it with the server's own Python as the model of every agent::

    PYTHONPATH=REPO python -m tests.fakes.letta_llm PORT [--latency-ms N] [--log FILE]

It plays the agents the project's examples describe, deterministically:

* a judge agent (``submit_grade`` among the offered tools) calls ``submit_grade`` once: the score
  is ``[[score=X]]`` when the prompt has that marker, else 1.0 when the prompt's "Expected Answer"
  section occurs in its "Submission" section (case-insensitive), else 0.0;
* an agent with a custom tool (any tool but Letta's own memory/search tools) calls the first one,
  every string parameter set to the last word of the user's message ("France" for "What is the
  capital of France?");
* a Letta Code agent (the user message carries the CLI's ``<system-reminder>`` blocks) gets a text
  answer, no tool call: the result of a simple ``A+B`` / ``A-B`` / ``A*B`` in the question (``4``
  for "What is 2+2?"), else ``ECHO: <question>``;
* a model judge (a request with ``response_format`` and no tools, as letta-evals' and ci-evals'
  ``model_judge`` send) gets ``{"score", "rationale"}`` as JSON content, scored like ``submit_grade``;
* after a tool result it answers with that result's text (``message`` of Letta's JSON envelope),
  which ends the turn of a ``letta_v1_agent``;
* otherwise it answers ``ECHO: <last user message>``; ``[[http500]]`` in the prompt gives HTTP 500.

A request with ``stream: true`` gets the same answer as OpenAI's server-sent events: a role delta,
the content (or each tool call's name, then its arguments) in pieces, a finish chunk carrying the
usage, then ``data: [DONE]`` (Letta Code's background streaming needs a model that streams).

``GET /v1/models`` lists gpt-4o-mini and gpt-4.1-mini (Letta shows them as ``openai-proxy/...``).
Token usage is estimated as the request's JSON length / 4 (about what tiktoken gives for English
and JSON), so Letta's usage figures are of a realistic size. ``GET /stats`` returns the counters:
requests, chat, judge, tool_calls, prompt_tokens, completion_tokens, and chat calls per model.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.chat_text import last_user, prompt_text, section, text_of

MODELS = ("gpt-4o-mini", "gpt-4.1-mini")
# Letta's own tools: never the "custom tool" an agent of the examples is about.
LETTA_TOOLS = {
    "send_message",
    "conversation_search",
    "archival_memory_search",
    "archival_memory_insert",
    "memory_insert",
    "memory_replace",
    "memory_rethink",
    "memory_finish_edits",
    "core_memory_append",
    "core_memory_replace",
    "memory",
    "web_search",
    "fetch_webpage",
    "run_code",
    "send_message_to_agent_async",
}
STATS: dict[str, Any] = {
    "requests": 0,
    "chat": 0,
    "judge": 0,
    "tool_calls": 0,
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "models": {},
}
LOCK = threading.Lock()
LATENCY = 0.0
LOG: str | None = None


def judge_score(prompt: str) -> tuple[float, str]:
    m = re.search(r"\[\[score=(-?[0-9.]+)\]\]", prompt)
    if m:
        return float(m.group(1)), f"the prompt asked for {m.group(1)}"
    expected = section(prompt, "Expected Answer")
    submission = section(prompt, "The Agent's Submission") or ""
    if expected is None:
        return 1.0, "no expected answer to compare"
    if expected.lower() in submission.lower():
        return 1.0, f"the submission contains '{expected}'"
    return 0.0, f"the submission does not contain '{expected}'"


def tool_result_text(content: str) -> str:
    """Letta wraps a tool's return value as JSON ``{"status", "message", "time"}``."""
    try:
        doc = json.loads(content)
    except ValueError:
        return content
    return str(doc.get("message", content)) if isinstance(doc, dict) else content


def letta_code_answer(user: str) -> str:
    """A Letta Code turn: the question without the CLI's ``<system-reminder>`` blocks, answered in text."""
    question = re.sub(r"<system-reminder>.*?</system-reminder>", "", user, flags=re.S).strip()
    m = re.search(r"(-?\d+)\s*([-+*])\s*(-?\d+)", question)
    if m:
        a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
        return str(a + b if op == "+" else a - b if op == "-" else a * b)
    return f"ECHO: {question}"


def reply(req: dict[str, Any]) -> tuple[str | None, tuple[str, dict[str, Any]] | None]:
    """(content, tool call) for one chat request."""
    msgs = [m for m in req.get("messages") or [] if isinstance(m, dict)]
    tools = {
        (t.get("function") or {}).get("name"): t.get("function") or {}
        for t in req.get("tools") or []
    }
    user = last_user(req)
    if msgs and msgs[-1].get("role") == "tool":
        name = msgs[-1].get("name") or ""
        return (
            "Grade submitted."
            if name == "submit_grade"
            else tool_result_text(text_of(msgs[-1].get("content")))
        ), None
    if "Letta Code" in user and "<system-reminder>" in user:
        return letta_code_answer(user), None
    if "submit_grade" in tools:
        score, why = judge_score(prompt_text(req))
        return None, ("submit_grade", {"score": score, "rationale": why})
    if (
        req.get("response_format") and not tools
    ):  # a model judge (letta-evals' or ci-evals' model_judge)
        score, why = judge_score(prompt_text(req))
        return json.dumps({"score": score, "rationale": why}), None
    custom = [n for n in tools if n and n not in LETTA_TOOLS]
    if custom:
        props = (tools[custom[0]].get("parameters") or {}).get("properties") or {}
        found = re.findall(r"[\w'-]+", user)
        args = {
            p: (found[-1] if found else "")
            for p, s in props.items()
            if isinstance(s, dict) and s.get("type", "string") == "string"
        }
        return None, (custom[0], args)
    return f"ECHO: {user}", None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, obj: Any) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.rstrip("/")
        if path.endswith("/stats"):
            with LOCK:
                return self._send(200, json.loads(json.dumps(STATS)))
        if path.endswith("/models"):
            return self._send(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "fake"}
                        for m in MODELS
                    ],
                },
            )
        self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            return self._send(400, {"error": {"message": "bad json"}})
        with LOCK:
            STATS["requests"] += 1
            if LOG:
                with open(LOG, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"path": self.path, "body": req}) + "\n")
        if LATENCY:
            time.sleep(LATENCY)
        if self.path.endswith("/embeddings"):
            inputs = req.get("input")
            inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": [(b - 128) / 128 for b in hashlib.sha256(str(t).encode()).digest()]
                    * 48,
                }
                for i, t in enumerate(inputs)
            ]
            return self._send(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": req.get("model"),
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                },
            )
        if not self.path.endswith("/chat/completions"):
            return self._send(404, {"error": {"message": "not found"}})
        if "[[http500]]" in raw.decode("utf-8", "replace"):
            return self._send(500, {"error": {"message": "injected by [[http500]]"}})
        content, call = reply(req)
        prompt_tokens = len(raw) // 4
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if call:
            args = json.dumps(call[1])
            message["tool_calls"] = [
                {
                    "id": "call_" + hashlib.sha256(raw).hexdigest()[:16],
                    "type": "function",
                    "function": {"name": call[0], "arguments": args},
                }
            ]
        completion_tokens = max(1, len(content or json.dumps(message.get("tool_calls"))) // 4)
        with LOCK:
            STATS["judge" if call and call[0] == "submit_grade" else "chat"] += 1
            STATS["tool_calls"] += 1 if call else 0
            STATS["prompt_tokens"] += prompt_tokens
            STATS["completion_tokens"] += completion_tokens
            model = str(req.get("model"))
            STATS["models"][model] = STATS["models"].get(model, 0) + 1
        head = {
            "id": "chatcmpl-" + hashlib.sha256(raw).hexdigest()[:12],
            "created": int(time.time()),
            "model": req.get("model", MODELS[0]),
        }
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        finish = "tool_calls" if call else "stop"
        if req.get("stream"):
            return self._stream(head, message, finish, usage)
        self._send(
            200,
            {
                **head,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            },
        )

    def _stream(
        self, head: dict[str, Any], message: dict[str, Any], finish: str, usage: dict[str, Any]
    ) -> None:
        """``stream: true``: the same answer as OpenAI's SSE chunks, then ``data: [DONE]``."""

        def chunk(delta: dict[str, Any], reason: str | None = None, **extra: Any) -> bytes:
            obj = {
                **head,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
                **extra,
            }
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        parts = [chunk({"role": "assistant", "content": ""})]
        content = message.get("content") or ""
        parts += [chunk({"content": content[i : i + 16]}) for i in range(0, len(content), 16)]
        for i, tc in enumerate(message.get("tool_calls") or []):
            fn = tc["function"]
            parts.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": tc["id"],
                                "type": "function",
                                "function": {"name": fn["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            args = fn["arguments"]
            parts += [
                chunk({"tool_calls": [{"index": i, "function": {"arguments": args[j : j + 32]}}]})
                for j in range(0, len(args), 32)
            ]
        parts += [chunk({}, finish, usage=usage), b"data: [DONE]\n\n"]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for part in parts:
            self.wfile.write(part)
            self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512


def main(argv: list[str]) -> None:
    global LATENCY, LOG
    port = int(argv[0])
    if "--latency-ms" in argv:
        LATENCY = float(argv[argv.index("--latency-ms") + 1]) / 1000
    if "--log" in argv:
        LOG = argv[argv.index("--log") + 1]
    Server(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
