"""What really went wrong with a call that got no HTTP answer: one mapping for every client.

The SDKs wrap transport failures differently (openai's aiohttp transport reports a DNS failure as
``APITimeoutError``; httpx says ``ConnectError: All connection attempts failed``), so the message a
user saw named the wrapper, not the cause. :func:`cause_of` walks the exception's
``__cause__``/``__context__`` chain down to the operating system's answer and names it:

==============  =======================================================  ============
kind            message                                                  worth retry
==============  =======================================================  ============
``dns``         could not resolve host 'h' (DNS: Name or service ...)    no
``dns_again``   could not resolve host 'h' right now (DNS: Temporary...) yes
``refused``     nothing listens on h:p (connection refused)              yes (*)
``tls``         TLS failed with h:p: <reason>                            no (**)
``timeout``     timed out after N s                                      yes
``dropped``     the connection to h:p dropped (<name>)                   yes
``connection``  connection failed (<name>)                               yes
==============  =======================================================  ============

(*) a refused connection is worth a retry only once the endpoint has answered before; the
scheduler's breaker (:mod:`ci_evals.llm.scheduler`) decides. (**) the same for a connection the
server closed during the TLS handshake.

An ``https://`` URL on a server that speaks plain HTTP fails in the TLS handshake: the server
answers bytes that are not TLS (``WRONG_VERSION_NUMBER``), or closes the connection (aiohttp then
says ``ConnectionResetError``, httpx an unexpected EOF). Both are ``tls`` with the hint
:data:`SCHEME_HINT`, never "the connection dropped". ``SYSTEMATIC`` names the kinds a
retry cannot fix, which the breaker counts. Messages never include credentials: they are built
from the host and port alone.
"""

from __future__ import annotations

import importlib
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

IDLE_REUSE_S = 1.5
"""Seconds an idle pooled connection may wait to be reused; older ones are closed, not sent on.
Below the keep-alive of the servers a run calls: 5 s in uvicorn (Letta's server and FastAPI
services), Node and Apache, 2 s in gunicorn. At the clients' old 5 s a request could go out on a
connection the server was closing that instant ("Server disconnected without sending a
response": seen once on the real Letta server)."""


def sdk_limits(http_client_cls: type, max_connections: int | None, max_keepalive: int) -> Any:
    """Connection limits for an SDK's ``DefaultAsyncHttpxClient`` with idle connections kept
    :data:`IDLE_REUSE_S` at most, built by the SDK's own HTTP library (openai moved from httpx to
    httpx2 in 2.x; a vendor SDK may follow)."""
    lib: Any = None
    for cls in http_client_cls.__mro__[1:]:  # the first base from a library that has Limits
        candidate = importlib.import_module(cls.__module__.split(".")[0])
        if hasattr(candidate, "Limits"):
            lib = candidate
            break
    if lib is None:
        import httpx as lib
    return lib.Limits(
        max_connections=max_connections,
        max_keepalive_connections=max_keepalive,
        keepalive_expiry=IDLE_REUSE_S,
    )


SYSTEMATIC = frozenset({"dns", "refused", "tls"})
"""Connection-level kinds a retry cannot fix (the breaker's causes, with 400/401/403/404)."""

SCHEME_HINT = "is the base_url scheme right (https vs http)?"
_NOT_TLS = (
    "WRONG_VERSION_NUMBER",
    "UNEXPECTED_EOF",
    "EOF occurred",
    "record layer failure",
    "packet length too long",
    "http request",
    "has been closed (EOF)",
)
"""What OpenSSL says when the other end does not speak TLS (plain HTTP answering, or hanging up)."""
_CONNECT_PHASE = ("ClientConnectorError", "ConnectError")
"""The transports' errors for a failure before any request was sent (aiohttp, httpx/httpcore)."""

_DNS_PERMANENT = {
    getattr(socket, n)
    for n in ("EAI_NONAME", "EAI_NODATA", "EAI_FAIL", "EAI_SERVICE")
    if hasattr(socket, n)
}


@dataclass(frozen=True)
class Cause:
    kind: str
    message: str
    retry: bool


def host_port(url: str | None) -> str:
    """``host:port`` of ``url`` (the scheme's default port when none), never user:password."""
    parts = urlsplit(url or "")
    host = parts.hostname or "?"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return f"{host}:{port}"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and link not in seen and len(seen) < 20:
        seen.append(link)
        link = link.__cause__ or link.__context__
    return seen


def _reason(exc: BaseException) -> str:
    text = (
        getattr(exc, "strerror", None)
        or getattr(exc, "reason", None)
        or str(exc)
        or type(exc).__name__
    )
    return " ".join(str(text).split())[:160]


def cause_of(exc: BaseException, url: str | None, timeout: float | None = None) -> Cause:
    """The cause of a call that failed without an HTTP status, for a call to ``url``."""
    chain = _chain(exc)
    where = host_port(url)
    host = where.rsplit(":", 1)[0]
    for e in chain:
        if isinstance(e, socket.gaierror):
            if e.errno in _DNS_PERMANENT or e.errno is None:
                return Cause("dns", f"could not resolve host '{host}' (DNS: {_reason(e)})", False)
            return Cause(
                "dns_again", f"could not resolve host '{host}' right now (DNS: {_reason(e)})", True
            )
    for e in chain:
        if isinstance(e, ConnectionRefusedError):
            return Cause("refused", f"nothing listens on {where} (connection refused)", True)
        if isinstance(e, ssl.SSLError | ssl.CertificateError):
            reason = _reason(e)
            if _connecting(chain) and any(
                sign in reason for sign in _NOT_TLS
            ):  # plain HTTP answered, or hung up
                return Cause(
                    "tls",
                    f"TLS failed with {where}: {reason} ({SCHEME_HINT})",
                    isinstance(e, ssl.SSLEOFError | ssl.SSLZeroReturnError),
                )  # a hang-up
            return Cause("tls", f"TLS failed with {where}: {reason}", False)
    if _handshake_dropped(chain, url):
        return Cause(
            "tls",
            f"TLS failed with {where}: the server closed the connection during the TLS handshake "
            f"({SCHEME_HINT})",
            True,
        )
    for e in chain:
        name = type(e).__name__
        if isinstance(e, TimeoutError) or "Timeout" in name:
            after = f" after {timeout:g} s" if timeout is not None else ""
            return Cause("timeout", f"timed out{after}", True)
    for e in chain:
        name = type(e).__name__
        if isinstance(
            e, ConnectionResetError | BrokenPipeError | ConnectionAbortedError
        ) or name in (
            "ServerDisconnectedError",
            "RemoteProtocolError",
            "ReadError",
            "ClientPayloadError",
        ):
            return Cause("dropped", f"the connection to {where} dropped ({name})", True)
    deepest = chain[-1] if chain else exc
    return Cause("connection", f"connection to {where} failed ({type(deepest).__name__})", True)


def _connecting(chain: list[BaseException]) -> bool:
    """The failure came before any request was sent (a transport's connect error is in the chain)."""
    return any(cls.__name__ in _CONNECT_PHASE for e in chain for cls in type(e).__mro__)


def _handshake_dropped(chain: list[BaseException], url: str | None) -> bool:
    """An ``https`` connection that the server dropped before any request was sent: in the TLS handshake."""
    return (
        urlsplit(url or "").scheme == "https"
        and _connecting(chain)
        and any(
            isinstance(e, ConnectionResetError | ConnectionAbortedError | BrokenPipeError)
            for e in chain
        )
    )
