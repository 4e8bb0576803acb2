"""A fake GitHub REST server for issue comments, over real HTTP on 127.0.0.1.

Serves what the PR-comment code uses: list comments (``per_page``/``page`` pagination with ``Link``
headers), create, update, and ``GET /user`` (a personal token's login; an installation token such
as ``GITHUB_TOKEN`` gets 403 "Resource not accessible by integration", as on GitHub, and its
comments are by ``github-actions[bot]``, type ``Bot``). Modes: ``forbidden`` (403 on writes, as for fork PRs), ``fail_next`` (that
many 502s before answering), ``limited`` (rate-limit answers, as GitHub sends them), ``prefix`` (a GitHub Enterprise ``/api/v3`` base). Every request is
logged so tests can assert exactly what was sent. The objects it answers with are GitHub's
(``tests/fakes/github_objects.py``, held to GitHub's OpenAPI description by
tests/test_supply_github.py).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.fakes import github_objects as objects

MAX_BODY = 65_536
TOO_LONG = objects.validation_error("body", f"body is too long (maximum is {MAX_BODY} characters)")


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    authorization: str | None
    body: Any
    raw_query: str = ""
    content_type: str | None = None
    status: int = 0
    """The fake's answer: its status and JSON body."""
    answer: Any = None


@dataclass
class FakeGitHub:
    """State and switches of the fake; ``url`` is the API base to point the client at."""

    token: str = "ghs_fake_token_0123456789"
    repo: str = "octo/widgets"
    prefix: str = ""
    forbidden: bool = False
    fail_next: int = 0
    limited: list[tuple[int, dict[str, str], str]] = field(default_factory=list)
    """Rate-limit answers (status, headers, message) served, in order, before anything else."""
    user_login: str | None = None
    pulls: dict[int, str] = field(default_factory=dict)
    """Pull request number -> its head commit sha (``GET /repos/{repo}/pulls/{n}``)."""
    """The token's user for a personal access token; None for an installation token (GITHUB_TOKEN)."""
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    log: list[Request] = field(default_factory=list)
    next_id: int = 1000
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def add_comments(
        self, number: int, bodies: list[str], author: dict[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Pre-existing comments on PR ``number``, oldest first; by the token's user unless ``author``."""
        return [self._new(number, b, author) for b in bodies]

    def own_user(self) -> dict[str, Any]:
        if self.user_login is None:
            return objects.user("github-actions[bot]", "Bot")
        return objects.user(self.user_login)

    def _new(self, number: int, body: str, author: dict[str, str] | None = None) -> dict[str, Any]:
        """A new comment; ``author`` names its user by ``login`` and ``type``."""
        self.next_id += 1
        who = objects.user(author["login"], author["type"]) if author else self.own_user()
        comment = objects.comment(self.repo, number, self.next_id, body, who)
        self.comments.setdefault(number, []).append(comment)
        return comment

    def writes(self) -> list[Request]:
        return [r for r in self.log if r.method in ("POST", "PATCH")]


def _handler(state: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    list_re = re.compile(
        rf"^{re.escape(state.prefix)}/repos/{re.escape(state.repo)}/issues/(\d+)/comments$"
    )
    pull_re = re.compile(rf"^{re.escape(state.prefix)}/repos/{re.escape(state.repo)}/pulls/(\d+)$")
    edit_re = re.compile(
        rf"^{re.escape(state.prefix)}/repos/{re.escape(state.repo)}/issues/comments/(\d+)$"
    )

    class Handler(BaseHTTPRequestHandler):
        logged: Request

        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            if status >= 400 and status != 422 and set(payload) == {"message"}:
                payload = objects.error(status, payload["message"])
            data = json.dumps(payload).encode()
            self.logged.status, self.logged.answer = status, json.loads(data)  # as sent
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _handle(self, method: str) -> None:
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            with state.lock:
                self.logged = Request(
                    method,
                    parts.path,
                    query,
                    self.headers.get("Authorization"),
                    body,
                    parts.query,
                    self.headers.get("Content-Type"),
                )
                state.log.append(self.logged)
                if state.fail_next > 0:
                    state.fail_next -= 1
                    return self._send(502, {"message": "Server Error"})
                if state.limited:
                    status, headers, message = state.limited.pop(0)
                    return self._send(status, {"message": message}, headers)
                if self.headers.get("Authorization") != f"Bearer {state.token}":
                    return self._send(401, {"message": "Bad credentials"})
                if state.forbidden and method != "GET":
                    return self._send(403, {"message": "Resource not accessible by integration"})
                m_list, m_edit = list_re.match(parts.path), edit_re.match(parts.path)
                m_pull = pull_re.match(parts.path)
                if method == "GET" and m_pull:
                    number = int(m_pull.group(1))
                    if number not in state.pulls:
                        return self._send(404, {"message": "Not Found"})
                    return self._send(200, objects.pull(state.repo, number, state.pulls[number]))
                if method == "GET" and parts.path == f"{state.prefix}/user":
                    if state.user_login is None:
                        return self._send(
                            403, {"message": "Resource not accessible by integration"}
                        )
                    return self._send(200, objects.authenticated_user(state.user_login))
                if method == "GET" and m_list:
                    return self._list(int(m_list.group(1)), query, parts.path)
                if method == "POST" and m_list:
                    if len(body.get("body", "")) > MAX_BODY:
                        return self._send(422, TOO_LONG)
                    return self._send(201, state._new(int(m_list.group(1)), body["body"]))
                if method == "PATCH" and m_edit:
                    if len(body.get("body", "")) > MAX_BODY:
                        return self._send(422, TOO_LONG)
                    for comments in state.comments.values():
                        for c in comments:
                            if c["id"] == int(m_edit.group(1)):
                                if c["user"] != state.own_user():  # same login and type
                                    return self._send(
                                        403, {"message": "Resource not accessible by integration"}
                                    )
                                c["body"] = body["body"]
                                return self._send(200, c)
                return self._send(404, {"message": "Not Found"})

        def _list(self, number: int, query: dict[str, str], path: str) -> None:
            per_page = min(int(query.get("per_page", 30)), 100)
            page = int(query.get("page", 1))
            items = state.comments.get(number, [])
            last = max((len(items) + per_page - 1) // per_page, 1)
            links = []
            base = f"http://127.0.0.1:{state.port}{path}?per_page={per_page}"
            if page < last:
                links.append(f'<{base}&page={page + 1}>; rel="next"')
                links.append(f'<{base}&page={last}>; rel="last"')
            headers = {"Link": ", ".join(links)} if links else {}
            self._send(200, items[(page - 1) * per_page : page * per_page], headers)

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

    return Handler


def start(state: FakeGitHub) -> ThreadingHTTPServer:
    """Serve ``state`` on a free loopback port in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = server.server_address[1]
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()
    return server


@pytest.fixture(name="github_server")
def github_server_fixture() -> Iterator[FakeGitHub]:
    """A running fake GitHub; yields its state (``.url``, ``.token``, ``.comments``, ``.log``).

    Import ``github_server_fixture`` into a test module and name the parameter ``github_server``.
    """
    state = FakeGitHub()
    server = start(state)
    yield state
    server.shutdown()
    server.server_close()
