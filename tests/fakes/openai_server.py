"""A local OpenAI-compatible HTTP server for tests and benchmarks (real HTTP on 127.0.0.1).

It speaks enough HTTP/1.1 (keep-alive, Content-Length bodies) on asyncio streams to serve hundreds
of concurrent requests with injected latency without becoming the bottleneck. Endpoints:
``POST /v1/chat/completions`` (JSON mode, tool calls), ``POST /v1/embeddings`` (deterministic
hashed bag-of-words vectors), ``GET /v1/models``.

Replies come from, in order: the FIFO queue filled by :meth:`FakeOpenAI.script`, the
``responder(request)`` callable, or the default responder. A reply may be:

* a ``str``: the assistant's content;
* a ``dict`` with ``content`` and/or ``tool_calls`` (``[{name, arguments}]``), optional
  ``finish_reason``, ``usage`` and ``delay_s`` (this reply's latency, beside ``latency``); a dict with ``choices`` is sent as the whole response;
  any other dict is JSON-encoded as the content (handy for judges: ``{"score": 1, ...}``);
* ``bytes``: sent as the body with status 200 (a malformed body), or, when it starts with
  ``HTTP/``, written verbatim as the whole response (chunked, compressed, odd framing);
* a :class:`Fault`: that fault, for this request only.

Faults (:meth:`FakeOpenAI.fault`) apply to the first ``k`` matching requests or at a rate:
``"429"`` (with ``Retry-After``), any other status code such as ``"500"``, ``"hang"`` (no reply
for ``hang_s``), ``"reset"`` (TCP RST), ``"close"`` (close without a reply), ``"malformed"``
(200 with a broken JSON body), ``"truncated"`` (200 whose body is cut short).

Token usage is counted in whitespace words: prompt = words of every message content, completion
= words of the reply, so tests can assert exact numbers.

Rate limits (:meth:`FakeOpenAI.rate_limit`): request and token buckets with OpenAI's documented
429 body and ``x-ratelimit-*`` / ``retry-after(-ms)`` headers; see :mod:`tests.fakes.ratelimit`
for the model and the token estimate. :attr:`FakeOpenAI.rate_stats` counts accepted and rejected
API requests and the most served at once.

Run it as a process for benchmarks: ``python -m tests.fakes.openai_server --latency 0.1
[--rpm 500] [--tpm N] [--burst-s 1]`` prints its base URL on the first line of stdout, and
``GET /_stats`` (outside ``/v1``, never limited or logged) answers ``rate_stats`` as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextvars
import json
import os
import random
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import ratelimit
from tests.fakes.chat_text import last_user, prompt_text, section, text_of  # noqa: F401 - importers use them

CHAT = "/v1/chat/completions"
EMBEDDINGS = "/v1/embeddings"
MODELS = "/v1/models"
STATS = "/_stats"
EMBED_DIM = 64
# Headers every response to the current request carries (the rate-limit state); set per request.
_HEADERS: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "fake_headers", default=None
)


@dataclass
class Fault:
    """An injected failure. ``first``: the first k matching requests; ``rate``: probability."""

    kind: str
    first: int | None = None
    rate: float | None = None
    retry_after: str | None = None
    path: str | None = CHAT
    hang_s: float = 30.0
    message: str | None = None
    seen: int = 0

    def applies(self, path: str, rng: random.Random) -> bool:
        if self.path is not None and path != self.path:
            return False
        self.seen += 1
        if self.first is not None:
            return self.seen <= self.first
        if self.rate is not None:
            return rng.random() < self.rate
        return True


@dataclass
class Request:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    peer: tuple | None = None
    at: float = field(default_factory=time.monotonic)


# --- helpers for responders -------------------------------------------------------------------


def json_mode(req: dict[str, Any]) -> bool:
    rf = req.get("response_format") or {}
    return rf.get("type") in ("json_object", "json_schema")


def words(text: str) -> int:
    return len(text.split())


def default_responder(answers: dict[str, str] | None = None) -> Callable[[dict[str, Any]], Any]:
    """Replies without a script.

    Chat: ``answers[last user message]`` if given, else the last user message echoed. JSON mode
    (a judge): score 1.0 when the prompt's "Expected Answer" section occurs in its "Submission"
    section (case-insensitive), else 0.0; no expected answer scores 1.0. The reply carries both
    the rubric fields (score, rationale) and the score_model fields (result, steps).
    """
    answers = answers or {}

    def respond(req: dict[str, Any]) -> Any:
        if not json_mode(req):
            user = last_user(req)
            return answers.get(user.strip(), user)
        text = prompt_text(req)
        expected = section(text, "Expected Answer")
        submission = section(text, "The Agent's Submission") or ""
        if expected is None:
            score, why = 1.0, "no expected answer to compare"
        elif expected.lower() in submission.lower():
            score, why = 1.0, f"the submission contains '{expected}'"
        else:
            score, why = 0.0, f"the submission does not contain '{expected}'"
        return {
            "score": score,
            "rationale": why,
            "result": score,
            "steps": [{"description": "compare", "conclusion": why}],
        }

    return respond


def embedding(text: str, dim: int = EMBED_DIM) -> list[float]:
    """A deterministic unit vector: hashed bag of lower-cased words."""
    vec = [0.0] * dim
    for tok in re.findall(r"\w+", text.lower()):
        vec[zlib.crc32(tok.encode()) % dim] += 1.0
    norm = sum(v * v for v in vec) ** 0.5
    return [v / norm for v in vec] if norm else vec


# --- the server -------------------------------------------------------------------------------


class FakeOpenAI:
    """The fake server. Use as a context manager or call :meth:`start` / :meth:`stop`.

    Args:
        responder: ``request body -> reply`` (see the module docstring); default
            :func:`default_responder`.
        latency: seconds to wait before answering each request.
        models: ids listed by ``/v1/models``.
        seed: seeds the RNG used for rate-based faults.
    """

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Any] | None = None,
        *,
        latency: float = 0.0,
        models: tuple[str, ...] = ("gpt-4o-mini", "text-embedding-3-small"),
        seed: int = 0,
        answers: dict[str, str] | None = None,
    ) -> None:
        self.responder = responder or default_responder(answers)
        self.latency = latency
        self.models = models
        self.requests: list[Request] = []
        self.record = True
        """Whether :attr:`requests` holds each request (False: only its length counts them)."""
        self.faults: list[Fault] = []
        self._queue: list[Any] = []
        self._rng = random.Random(seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task] = set()
        self._server: asyncio.base_events.Server | None = None
        self.port = 0
        self.max_in_flight = 0
        self._in_flight = 0
        self.clock: Callable[[], float] = time.monotonic
        self.limiter: ratelimit.Limiter | None = None
        self.accepted = 0
        self.rejected = 0

    # -- public API --

    @property
    def url(self) -> str:
        """The base URL clients use (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: Any) -> None:
        """Queue replies for the next chat/embedding requests, in order."""
        self._queue.extend(replies)

    def fault(
        self,
        kind: str,
        *,
        first: int | None = None,
        rate: float | None = None,
        retry_after: str | None = None,
        path: str | None = CHAT,
        hang_s: float = 30.0,
        message: str | None = None,
    ) -> Fault:
        """Inject a fault for the first ``first`` requests to ``path`` (or at ``rate``).

        ``path=None`` matches every path; ``message`` replaces an error status's message.
        """
        f = Fault(
            kind,
            first=first,
            rate=rate,
            retry_after=retry_after,
            path=path,
            hang_s=hang_s,
            message=message,
        )
        self.faults.append(f)
        return f

    def rate_limit(
        self, rpm: float | None = None, tpm: float | None = None, burst_s: float = 1.0
    ) -> None:
        """Enforce ``rpm`` requests and ``tpm`` tokens per minute (buckets of ``burst_s`` seconds, full).

        See :mod:`tests.fakes.ratelimit`. No arguments: no limit (the counts are kept).
        """
        self.limiter = (
            ratelimit.Limiter(rpm, tpm, burst_s, lambda: self.clock()) if (rpm or tpm) else None
        )

    @property
    def rate_stats(self) -> dict[str, int]:
        """API requests accepted and rejected (429 for a limit), and the most served at once."""
        return {
            "accepted": self.accepted,
            "rejected": self.rejected,
            "max_in_flight": self.max_in_flight,
        }

    def count(self, path: str | None = CHAT) -> int:
        """How many requests reached ``path`` (all paths when None)."""
        return sum(1 for r in list(self.requests) if path is None or r.path == path)

    def bodies(self, path: str = CHAT) -> list[Any]:
        """The JSON bodies of the requests to ``path``, in arrival order."""
        return [r.body for r in list(self.requests) if r.path == path]

    def reset(self) -> None:
        """Forget logged requests, faults and queued replies."""
        self.requests.clear()
        self.faults.clear()
        self._queue.clear()

    def start(self) -> FakeOpenAI:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            loop = self._loop
            asyncio.set_event_loop(loop)
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", self.port, backlog=2048)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return

        async def shutdown() -> None:
            self._server.close()
            for t in list(self._tasks):
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP --

    async def serve_forever(self, port: int = 0) -> None:
        """Serve in the current event loop (process mode)."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port, backlog=2048)
        self.port = self._server.sockets[0].getsockname()[1]
        print(self.url, flush=True)
        async with self._server:
            await self._server.serve_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    break
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if line:
                        k, _, v = line.partition(":")
                        headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length") or 0)
                raw = await reader.readexactly(n) if n else b""
                keep = await self._dispatch(method, target.split("?", 1)[0], headers, raw, writer)
                if not keep or headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            try:
                writer.close()
            except Exception:
                pass

    def _log(self, method: str, path: str, headers: dict, raw: bytes, writer) -> Any:
        """Record the request; its JSON body (None when it is not JSON)."""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        # Process mode (benchmarks) keeps only the count: a sitting of 100,000s of requests would
        # otherwise grow the server by GBs, and its full collections would stall every call in flight.
        self.requests.append(
            Request(method, path, headers, body, writer.get_extra_info("peername"))
            if self.record
            else None
        )
        return body

    async def _dispatch(self, method: str, path: str, headers: dict, raw: bytes, writer) -> bool:
        if method == "GET" and path == STATS:
            return self._send(writer, 200, self.rate_stats)
        body = self._log(method, path, headers, raw, writer)
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        token = _HEADERS.set(None)
        try:
            if method == "POST" and self._limited(path):
                rejected = self._admit(path, body if isinstance(body, dict) else {})
                if rejected is not None:
                    return rejected(writer)
            if self.latency:
                await asyncio.sleep(self.latency)
            return await self._respond(method, path, headers, body, writer)
        finally:
            self._in_flight -= 1
            _HEADERS.reset(token)

    # -- rate limits (the vendor fakes override the shapes) --

    def _limited(self, path: str) -> bool:
        """Whether ``path`` is an API route the limit applies to."""
        return path in (CHAT, EMBEDDINGS)

    def _admit(self, path: str, body: dict[str, Any]) -> Callable[[Any], bool] | None:
        """Charge the request; None when it may go on, else what sends its 429."""
        if self.limiter is None:
            self.accepted += 1
            return None
        model, tokens = self._estimate(path, body)
        rej = self.limiter.admit(str(model), tokens)
        _HEADERS.set(self._rate_headers(self.limiter))
        if rej is None:
            self.accepted += 1
            return None
        self.rejected += 1
        return lambda writer: self._reject(writer, rej)

    def _estimate(self, path: str, body: dict[str, Any]) -> tuple[str, int]:
        """(model, tokens charged on arrival): prompt words + the completion cap, if any."""
        if path == EMBEDDINGS:
            inputs = body.get("input")
            inputs = (
                [inputs] if isinstance(inputs, str) else inputs if isinstance(inputs, list) else []
            )
            return body.get("model", "?"), sum(words(str(t)) for t in inputs)
        return body.get("model", "?"), words(prompt_text(body)) + _cap(body)

    def _rate_headers(self, limiter: ratelimit.Limiter) -> dict[str, str]:
        return ratelimit.openai_headers(limiter)

    def _reject(self, writer, rej: ratelimit.Rejection) -> bool:
        body, extra = ratelimit.openai_rejection(rej)
        return self._send(writer, 429, body, extra)

    async def _respond(self, method: str, path: str, headers: dict, body: Any, writer) -> bool:
        """Faults, then the route's answer (after the latency)."""
        fault = next((f for f in self.faults if f.applies(path, self._rng)), None)
        reply = None
        if fault is None and path in (CHAT, EMBEDDINGS) and method == "POST":
            reply = self._next_reply(body if isinstance(body, dict) else {}, path)
            if isinstance(reply, Fault):
                fault = reply
        if fault is not None:
            return await self._fault(fault, writer)
        if isinstance(reply, dict) and reply.get("delay_s"):  # this reply's own latency
            await asyncio.sleep(float(reply["delay_s"]))
        if method == "GET" and path == MODELS:
            data = {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "fake"}
                    for m in self.models
                ],
            }
            return self._send(writer, 200, data)
        if method != "POST" or path not in (CHAT, EMBEDDINGS):
            return self._send(writer, 404, _error(f"no route {method} {path}", "not_found"))
        if not isinstance(body, dict) or "model" not in body:
            return self._send(
                writer,
                400,
                _error("request body must be JSON with a 'model'", "invalid_request_error"),
            )
        if isinstance(reply, bytes) and reply.startswith(b"HTTP/"):
            writer.write(reply)  # a whole response, status line and headers included
            return b"connection: close" not in reply.lower()
        if isinstance(reply, bytes):
            return self._send_raw(writer, 200, reply)
        if path == EMBEDDINGS:
            return self._send(
                writer, 200, reply if isinstance(reply, dict) else self._embeddings(body)
            )
        completion = self._completion(body, reply)
        if self.limiter is not None and not _cap(body):
            self.limiter.charge_tokens(int(completion["usage"].get("completion_tokens") or 0))
        return self._send(writer, 200, completion)

    def _next_reply(self, body: dict[str, Any], path: str) -> Any:
        if self._queue:
            return self._queue.pop(0)
        if path == EMBEDDINGS:
            return None
        return self.responder(body)

    async def _fault(self, fault: Fault, writer: asyncio.StreamWriter) -> bool:
        kind = fault.kind
        if kind.isdigit():
            extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            status = int(kind)
            return self._send(
                writer, status, _error(fault.message or f"injected {status}", "server_error"), extra
            )
        if kind == "hang":
            await asyncio.sleep(fault.hang_s)
            return False
        if kind == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if kind == "close":
            return False
        if kind == "malformed":
            return self._send_raw(writer, 200, b'{"id": "chatcmpl-broken", "choices": [')
        if kind == "truncated":
            body = json.dumps({"id": "chatcmpl-cut", "choices": []}).encode()
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body) + 100}\r\n\r\n"
            writer.write(head.encode() + body[: len(body) // 2])
            await writer.drain()
            return False
        raise ValueError(f"unknown fault kind {kind!r}")

    def _send(self, writer, status: int, data: Any, extra: dict[str, str] | None = None) -> bool:
        return self._send_raw(writer, status, json.dumps(data).encode(), extra)

    @staticmethod
    def _send_raw(writer, status: int, body: bytes, extra: dict[str, str] | None = None) -> bool:
        """Write one response; any status (Anthropic's 529 is not in ``http.HTTPStatus``)."""
        phrase = (
            HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Overloaded"
        )
        lines = [
            f"HTTP/1.1 {status} {phrase}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
        ]
        lines += [f"{k}: {v}" for k, v in {**(_HEADERS.get() or {}), **(extra or {})}.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        return True

    def _completion(self, req: dict[str, Any], reply: Any) -> dict[str, Any]:
        if isinstance(reply, dict) and "choices" in reply:
            return reply
        if isinstance(reply, dict) and ("content" in reply or "tool_calls" in reply):
            spec = reply
        elif isinstance(reply, (dict, list)):
            spec = {"content": json.dumps(reply)}
        else:
            spec = {"content": "" if reply is None else str(reply)}
        message: dict[str, Any] = {"role": "assistant", "content": spec.get("content")}
        calls = []
        for i, tc in enumerate(spec.get("tool_calls") or []):
            args = tc.get("arguments", {})
            calls.append(
                {
                    "id": tc.get("id") or f"call_{len(self.requests)}_{i}",
                    "type": "function",
                    "function": {
                        "name": tc["name"],
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
            )
        if calls:
            message["tool_calls"] = calls
        completion_words = words(message["content"] or "") + sum(
            words(c["function"]["arguments"]) for c in calls
        )
        usage = spec.get("usage") or {
            "prompt_tokens": words(prompt_text(req)),
            "completion_tokens": completion_words,
        }
        usage.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": req.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": spec.get("finish_reason")
                    or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": usage,
        }

    @staticmethod
    def _embeddings(req: dict[str, Any]) -> dict[str, Any]:
        inputs = req.get("input")
        inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
        data = []
        for i, text in enumerate(inputs):
            vec = embedding(str(text))
            if req.get("encoding_format") == "base64":
                vec = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
            data.append({"object": "embedding", "index": i, "embedding": vec})
        n = sum(words(str(t)) for t in inputs)
        return {
            "object": "list",
            "data": data,
            "model": req.get("model"),
            "usage": {"prompt_tokens": n, "total_tokens": n},
        }


def _cap(body: dict[str, Any]) -> int:
    """The request's completion-token cap (0 when it sets none)."""
    cap = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return cap if isinstance(cap, int) and cap > 0 else 0


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


# --- pytest fixtures and process mode -------------------------------------------------------


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAI]:
    """A started fake server; its URL is ``openai_server.url``."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def openai_env(openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> FakeOpenAI:
    """The fake server, with OPENAI_BASE_URL and OPENAI_API_KEY pointing at it."""
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-key-123456")
    return openai_server


def spawn(
    latency: float = 0.0,
    answers_file: str | None = None,
    *,
    rpm: float | None = None,
    tpm: float | None = None,
    burst_s: float = 1.0,
    responder: str | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start the server in its own process (benchmarks: no GIL sharing); returns (process, url).

    ``rpm``/``tpm``/``burst_s`` as :meth:`FakeOpenAI.rate_limit`; read the counts with :func:`stats`.
    ``responder``: ``"module:function"`` importable from the repository root, replacing the default.
    """
    cmd = [
        sys.executable,
        "-m",
        "tests.fakes.openai_server",
        "--latency",
        str(latency),
        "--burst-s",
        str(burst_s),
    ]
    if answers_file:
        cmd += ["--answers", answers_file]
    cmd += ["--rpm", str(rpm)] if rpm else []
    cmd += ["--tpm", str(tpm)] if tpm else []
    cmd += ["--responder", responder] if responder else []
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=root, env=env)
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"the fake OpenAI server did not start (printed {url!r})")
    return proc, url


def stats(url: str) -> dict[str, int]:
    """A served process's ``rate_stats`` (``GET /_stats``), from its base URL."""
    import urllib.request

    with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + STATS, timeout=10) as resp:
        return json.loads(resp.read())


def main(argv: list[str] | None = None) -> None:
    """Process mode: serve on 127.0.0.1 until killed, printing the base URL first."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--answers", help="JSON file mapping a user message to the assistant's reply")
    p.add_argument(
        "--rpm", type=float, help="requests per minute (429 beyond; see tests/fakes/ratelimit.py)"
    )
    p.add_argument("--tpm", type=float, help="tokens per minute")
    p.add_argument(
        "--burst-s", type=float, default=1.0, help="seconds of the limit a bucket holds (default 1)"
    )
    p.add_argument(
        "--responder", help="module:function answering a chat request body (replaces the default)"
    )
    args = p.parse_args(argv)
    answers = responder = None
    if args.answers:
        with open(args.answers, encoding="utf-8") as fh:
            answers = json.load(fh)
    if args.responder:
        import importlib

        module, _, func = args.responder.partition(":")
        responder = getattr(importlib.import_module(module), func)
    server = FakeOpenAI(responder, latency=args.latency, answers=answers)
    server.record = False  # nothing in this process reads them back (/_stats counts)
    server.rate_limit(args.rpm, args.tpm, args.burst_s)
    try:
        asyncio.run(server.serve_forever(args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
