"""Local fakes of the Anthropic Messages API and the Gemini ``generateContent`` API (real HTTP).

Both reuse :class:`~tests.fakes.openai_server.FakeOpenAI`'s HTTP server, request log, scripted
replies and faults (``hang``, ``reset``, ``close``, ``malformed``, ``truncated``); what differs is
the route, the request checks and the JSON shapes, taken from the vendors' API references:

* Anthropic (https://docs.anthropic.com/en/api/messages, /en/api/errors): ``POST /v1/messages``
  with the key (``x-api-key``, or ``Authorization: Bearer`` as anthropic 2.x sends it) and an
  ``anthropic-version`` header; ``model``, ``max_tokens`` and
  ``messages`` required; from API version 2026-10-21 (what anthropic 2.x sends) ``temperature``,
  ``top_p`` and ``top_k`` are a 400 ("Extra inputs are not permitted"), as the real API answers. Errors are ``{"type": "error", "error": {"type", "message"},
  "request_id"}`` with the documented type per status (429 ``rate_limit_error``, 500
  ``api_error``, 529 ``overloaded_error``, ...).
* Gemini (https://ai.google.dev/api/generate-content, /gemini-api/docs/troubleshooting):
  ``POST /v1beta/models/{model}:generateContent`` with ``x-goog-api-key``. Errors are
  ``{"error": {"code", "message", "status", "details"}}``; a 429 carries a
  ``google.rpc.RetryInfo`` detail with ``retryDelay``.

A reply (scripted or from the responder) is what the model says: a ``str``, or any other JSON
value sent as its text (handy for judges: ``{"score": 1, "rationale": "..."}``), or a ``dict``
with ``text`` plus optional ``usage`` / ``stop_reason`` (Anthropic) or ``finish_reason``
(Gemini). The default responder is the OpenAI fake's judge: it sees the request as a chat
request (system prompt + messages; structured output counts as JSON mode). Tokens are counted
in whitespace words, as in the OpenAI fake.

``rate_limit(rpm, tpm, burst_s)`` works as on the OpenAI fake (:mod:`tests.fakes.ratelimit`), with
each vendor's 429: Anthropic's ``rate_limit_error`` with ``retry-after`` and the
``anthropic-ratelimit-*`` headers on every response; Gemini's ``RESOURCE_EXHAUSTED`` with a
``RetryInfo`` delay. The fault ``"overloaded"`` is Anthropic's 529 ``overloaded_error``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes import ratelimit
from tests.fakes.openai_server import FakeOpenAI, Fault, text_of, words

MESSAGES = "/v1/messages"
SAMPLING_GONE = "2026-10-21"
"""The Anthropic API version that removed the sampling parameters (temperature, top_p, top_k)."""
_GEMINI_ROUTE = re.compile(r"^/v1(?:beta|alpha)?/models/([^/:]+):generateContent$")

ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def _reply_text(reply: Any) -> tuple[str, dict[str, Any]]:
    """(model text, the reply's options) for any reply form."""
    if isinstance(reply, dict) and "text" in reply:
        return str(reply["text"]), reply
    if isinstance(reply, (dict, list)):
        return json.dumps(reply), {}
    return "" if reply is None else str(reply), {}


class _VendorFake(FakeOpenAI):
    """What both vendor fakes share: routing through one ``_handle_api`` and vendor error bodies."""

    def fault(self, kind: str, *, path: str | None = None, **kw: Any) -> Fault:  # type: ignore[override]
        """As :meth:`FakeOpenAI.fault`, but on every path by default; ``"overloaded"`` is a 529."""
        return super().fault("529" if kind == "overloaded" else kind, path=path, **kw)

    def count(self, path: str | None = None) -> int:  # type: ignore[override]
        return super().count(path)

    def bodies(self, path: str | None = None) -> list[Any]:  # type: ignore[override]
        return [r.body for r in list(self.requests) if path is None or r.path == path]

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    async def _fault(self, fault: Fault, writer) -> bool:
        if not fault.kind.isdigit():
            return await super()._fault(fault, writer)
        status = int(fault.kind)
        extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
        return self._send(
            writer, status, self.error_body(status, fault.message or f"injected {status}"), extra
        )

    def _estimate(self, path: str, body: dict[str, Any]) -> tuple[str, int]:
        view = self.chat_view(path, body)
        return view["model"], sum(words(text_of(m["content"])) for m in view["messages"]) + view[
            "cap"
        ]

    async def _respond(self, method: str, path: str, headers: dict, body: Any, writer) -> bool:
        fault = next((f for f in self.faults if f.applies(path, self._rng)), None)
        if fault is not None:
            return await self._fault(fault, writer)
        status, data = self.handle(method, path, headers, body)
        if isinstance(data, bytes):
            return self._send_raw(writer, status, data)
        return self._send(writer, status, data)

    def _reply(self, chat_view: dict[str, Any]) -> Any:
        return self._queue.pop(0) if self._queue else self.responder(chat_view)

    def handle(self, method: str, path: str, headers: dict, body: Any) -> tuple[int, Any]:
        raise NotImplementedError

    def chat_view(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The request as a chat request (model, messages, response_format) plus ``cap``: its output cap."""
        raise NotImplementedError


class FakeAnthropic(_VendorFake):
    """The Anthropic Messages API. ``url`` is the SDK's ``base_url`` (no ``/v1``)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _limited(self, path: str) -> bool:
        return path == MESSAGES

    def _rate_headers(self, limiter: ratelimit.Limiter) -> dict[str, str]:
        return ratelimit.anthropic_headers(limiter)

    def _reject(self, writer, rej: ratelimit.Rejection) -> bool:
        message, extra = ratelimit.anthropic_rejection(rej)
        return self._send(writer, 429, self.error_body(429, message), extra)

    def chat_view(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        system = body.get("system")
        messages = [{"role": "system", "content": text_of(system)}] if system else []
        messages += [
            {"role": m.get("role"), "content": m.get("content")}
            for m in body.get("messages") or []
            if isinstance(m, dict)
        ]
        view = {"model": str(body.get("model", "?")), "messages": messages}
        if ((body.get("output_config") or {}).get("format") or {}).get("type") == "json_schema":
            view["response_format"] = {"type": "json_schema"}
        cap = body.get("max_tokens")
        return {**view, "cap": cap if isinstance(cap, int) and cap > 0 else 0}

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = ANTHROPIC_ERRORS.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": f"req_{len(self.requests)}",
        }

    def handle(self, method: str, path: str, headers: dict, body: Any) -> tuple[int, Any]:
        if method != "POST" or path != MESSAGES:
            return 404, self.error_body(404, f"Not found: {method} {path}")
        bearer = headers.get("authorization", "")
        if not headers.get("x-api-key") and not bearer.startswith("Bearer "):
            return 401, self.error_body(401, "x-api-key header is required")
        if not headers.get("anthropic-version"):
            return 400, self.error_body(400, "anthropic-version: header is required")
        if not isinstance(body, dict):
            return 400, self.error_body(400, "The request body is not valid JSON")
        for key in ("model", "max_tokens", "messages"):
            if key not in body:
                return 400, self.error_body(400, f"{key}: Field required")
        if headers.get("anthropic-version") >= SAMPLING_GONE:
            for key in ("temperature", "top_p", "top_k"):
                if key in body:
                    return 400, self.error_body(400, f"{key}: Extra inputs are not permitted")
        view = self.chat_view(path, body)
        view.pop("cap")
        messages = view["messages"]
        reply = self._reply(view)
        if isinstance(reply, bytes):
            return 200, reply
        text, opts = _reply_text(reply)
        usage = opts.get("usage") or {
            "input_tokens": sum(words(text_of(m["content"])) for m in messages),
            "output_tokens": words(text),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        return 200, {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": text}],
            "stop_reason": opts.get("stop_reason", "end_turn"),
            "stop_sequence": None,
            "usage": usage,
        }


class FakeGemini(_VendorFake):
    """The Gemini API (``generateContent``). ``url`` is the SDK's ``base_url``."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _limited(self, path: str) -> bool:
        return _GEMINI_ROUTE.match(path) is not None

    def _rate_headers(self, limiter: ratelimit.Limiter) -> dict[str, str]:
        return {}  # Gemini reports no rate-limit headers

    def _reject(self, writer, rej: ratelimit.Rejection) -> bool:
        message, details = ratelimit.gemini_rejection(rej)
        return self._send(writer, 429, self.error_body(429, message, details))

    def chat_view(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        def text(content: Any) -> str:
            parts = content.get("parts") if isinstance(content, dict) else None
            return " ".join(str(p.get("text", "")) for p in parts or [] if isinstance(p, dict))

        route = _GEMINI_ROUTE.match(path)
        messages = []
        system = body.get("systemInstruction") or body.get("system_instruction")
        if system:
            messages.append({"role": "system", "content": text(system)})
        for content in body.get("contents") or []:
            role = content.get("role", "user") if isinstance(content, dict) else "user"
            messages.append(
                {"role": "user" if role == "user" else "assistant", "content": text(content)}
            )
        config = body.get("generationConfig") or {}
        view = {"model": route.group(1) if route else "?", "messages": messages}
        if config.get("responseMimeType") == "application/json":
            view["response_format"] = {"type": "json_schema"}
        cap = config.get("maxOutputTokens")
        return {**view, "cap": cap if isinstance(cap, int) and cap > 0 else 0}

    def error_body(self, status: int, message: str, details: list | None = None) -> dict[str, Any]:
        err: dict[str, Any] = {
            "code": status,
            "message": message,
            "status": GEMINI_STATUS.get(
                status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION"
            ),
        }
        if details is None and status == 429:
            details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.05s"}]
        if details:
            err["details"] = details
        return {"error": err}

    def handle(self, method: str, path: str, headers: dict, body: Any) -> tuple[int, Any]:
        route = _GEMINI_ROUTE.match(path)
        if method != "POST" or route is None:
            return 404, self.error_body(404, f"Method not found: {method} {path}")
        if not headers.get("x-goog-api-key"):
            return 403, self.error_body(
                403,
                "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
            )
        if not isinstance(body, dict) or not body.get("contents"):
            return 400, self.error_body(
                400, "* GenerateContentRequest.contents: contents is not specified"
            )
        view = self.chat_view(path, body)
        view.pop("cap")
        messages = view["messages"]
        reply = self._reply(view)
        if isinstance(reply, bytes):
            return 200, reply
        text, opts = _reply_text(reply)
        prompt = sum(words(text_of(m["content"])) for m in messages)
        usage = opts.get("usage") or {
            "promptTokenCount": prompt,
            "candidatesTokenCount": words(text),
            "totalTokenCount": prompt + words(text),
        }
        return 200, {
            "candidates": [
                {
                    "content": {"parts": [{"text": text}], "role": "model"},
                    "finishReason": opts.get("finish_reason", "STOP"),
                    "index": 0,
                }
            ],
            "usageMetadata": usage,
            "modelVersion": route.group(1),
            "responseId": f"resp-{len(self.requests)}",
        }


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def gemini_server() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server
