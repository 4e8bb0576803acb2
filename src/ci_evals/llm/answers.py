"""Who we say we are, and what a server says back, read honestly (issue 41, item 6).

* **Identity.** Calls that ci-evals builds itself (the direct path of :mod:`ci_evals.llm.transport`)
  say so: ``User-Agent: ci-evals/<version>``, and none of the SDK's ``X-Stainless-*`` telemetry
  headers (the SDK is not what sends them; no OpenAI-compatible API requires them: OpenAI's own
  reference calls the API with ``Authorization`` and ``Content-Type`` alone). The key, and the
  organization and project the SDK would read from ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID``, are
  sent as the SDK sends them.
* **Errors.** A failed call's line carries the server's own message and its request id
  (:mod:`ci_evals.llm.said`), e.g. ``HTTP 500: the server had an error (request req_abc123)``.
* **An error inside an HTTP 200** (OpenRouter: ``{"error": {"message": ..., "code": 502}}`` with
  status 200) is a failure of that code with the server's message, not "no choices[0].message":
  a 5xx-like code is retried as transient, a 429 is a throttle, a 401 stops as a 401 would.
* :func:`unusable`: why a 200 cannot be used (it is then a failure, retried, and never cached).
"""

from __future__ import annotations

import os
from typing import Any

from ci_evals import __version__
from ci_evals._util.text import one_line
from ci_evals.llm.failures import Failure, status_failure
from ci_evals.llm.said import server_says

USER_AGENT = f"ci-evals/{__version__}"


def identity_headers(key: str) -> dict[str, str]:
    """The headers of every call the direct path sends to an OpenAI-compatible endpoint."""
    headers = {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
    }
    for name, var in (
        ("OpenAI-Organization", "OPENAI_ORG_ID"),
        ("OpenAI-Project", "OPENAI_PROJECT_ID"),
    ):
        if os.environ.get(var):
            headers[name] = os.environ[var]
    headers["Authorization"] = f"Bearer {key}"
    return headers


def _message_and_code(data: Any) -> tuple[Any, Any]:
    """(message, code) from an OpenAI-style error body: ``{"error": {"message", "code"}}``,
    ``{"error": "text"}`` or ``{"message": ...}``."""
    if not isinstance(data, dict):
        return None, None
    err = data.get("error")
    if isinstance(err, dict):
        return err.get("message"), err.get("code")
    return (err if isinstance(err, str) and err else data.get("message")), None


def error_answer(status: int, data: Any, headers: Any) -> Failure:
    """The Failure for an HTTP error answer (status >= 300) with its body read as JSON (or None)."""
    text, code = _message_and_code(data)
    return status_failure(status, server_says(text, headers), headers, str(code) if code else None)


def error_in_200(path: str, data: dict[str, Any], headers: Any) -> Failure | None:
    """The Failure for an HTTP 200 that carries an error object instead of an answer, or None.

    A numeric code of 400-599 is the status the server meant (OpenRouter forwards the upstream
    provider's): classified as that status would be (:func:`status_failure`). Any other code is a
    transient failure (retried, like any 200 without an answer).
    """
    if not data.get("error") or unusable(path, data) is None:
        return None
    text, code = _message_and_code(data)
    said = server_says(text, headers)
    meant = (
        code
        if isinstance(code, int) and not isinstance(code, bool)
        else (
            int(code)
            if isinstance(code, str) and code.isascii() and code.isdigit() and len(code) == 3
            else None
        )
    )
    if meant is not None and 400 <= meant < 600:
        return status_failure(meant, said, headers, None, label=f"HTTP 200 with error {meant}")
    shown = f" (code {one_line(code, 40)})" if code not in (None, "") else ""
    return Failure(f"HTTP 200 with an error{shown}: {said}", headers=headers)


def unusable(path: str, data: dict[str, Any]) -> str | None:
    """Why a 200 response (or a cache entry) cannot be used, or None: what is never returned is never cached."""
    if path.endswith("/chat/completions"):
        choices = data.get("choices")
        if not (
            isinstance(choices, list)
            and choices
            and isinstance(choices[0], dict)
            and isinstance(choices[0].get("message"), dict)
        ):
            return "the response has no choices[0].message"
    elif path.endswith("/embeddings"):
        items = data.get("data")
        if not (
            isinstance(items, list)
            and items
            and all(isinstance(d, dict) and isinstance(d.get("embedding"), list) for d in items)
        ):
            return "the response has no embeddings"
    return None
