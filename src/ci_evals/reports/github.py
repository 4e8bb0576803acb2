"""GitHub REST: find this suite's PR comment by its hidden marker and update it, or create it.

Posting is best effort: no token, a 403 (pull requests from forks get a read-only token), a 404 or
a 5xx that outlives the retries becomes a warning, and the caller's exit code never depends on it.
The token goes into one request header and nowhere else.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ci_evals import __version__
from ci_evals._util.netcause import cause_of
from ci_evals._util.redact import register, scrub_and_shorten
from ci_evals._util.retry import Backoff, retry_after

DEFAULT_API = "https://api.github.com"
MAX_WAIT = 90.0
"""Seconds of a GitHub rate-limit wait we sit out; a longer one is reported, not waited for."""
SECONDARY_LIMIT_WAIT = 60.0
"""GitHub: a rate-limited answer naming no time means "wait at least one minute"."""
BACKOFF_CAP = 30.0
DEADLINE = 300.0
"""Seconds one API call (with its retries) may take in all."""
GITHUB_LIMIT = 65_536
ACTIONS_BOT = "github-actions[bot]"
"""The author GitHub gives comments made with the workflow's GITHUB_TOKEN."""
MAX_PAGES = 200
"""At 100 comments a page: 20,000 comments before we give up looking and create a new one."""


class GitHubError(Exception):
    """A request that failed for good; ``status`` is None for a connection failure."""

    def __init__(
        self, message: str, status: int | None = None, *, rate_limited: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.rate_limited = rate_limited


def pr_number_from_event(event_path: str | os.PathLike[str] | None) -> int | None:
    """The pull request (or issue) number from the ``$GITHUB_EVENT_PATH`` payload, if there is one."""
    if not event_path:
        return None
    try:
        payload = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(payload, dict):
        return None
    candidates = [payload.get("pull_request"), payload.get("issue")]
    runs = (payload.get("workflow_run") or {}).get("pull_requests") or []
    candidates += runs[:1]
    for item in candidates:
        if isinstance(item, dict) and isinstance(item.get("number"), int):
            return item["number"]
    return None


def workflow_run_head(event_path: str | os.PathLike[str] | None) -> str | None:
    """``workflow_run.head_sha`` from the event payload: the commit the reported run was for."""
    try:
        payload = json.loads(Path(event_path).read_text(encoding="utf-8")) if event_path else None
    except (OSError, ValueError):
        return None
    run = payload.get("workflow_run") if isinstance(payload, dict) else None
    sha = run.get("head_sha") if isinstance(run, dict) else None
    return sha if isinstance(sha, str) and sha else None


def run_url(env: Mapping[str, str]) -> str | None:
    """The link to this workflow run, from the standard ``GITHUB_*`` variables."""
    server, repo, run_id = (
        env.get("GITHUB_SERVER_URL"),
        env.get("GITHUB_REPOSITORY"),
        env.get("GITHUB_RUN_ID"),
    )
    if not (server and repo and run_id):
        return None
    url = f"{server.rstrip('/')}/{repo}/actions/runs/{run_id}"
    attempt = env.get("GITHUB_RUN_ATTEMPT")
    return f"{url}/attempts/{attempt}" if attempt and attempt != "1" else url


class CommentClient:
    """A small GitHub REST client for issue comments, with retries on 5xx, 429 and lost connections."""

    def __init__(
        self,
        token: str,
        repository: str,
        *,
        api_url: str | None = None,
        retries: int = 3,
        backoff: float = 1.0,
        timeout: float = 30.0,
    ) -> None:
        import httpx

        self.api_url = (api_url or DEFAULT_API).rstrip("/")
        self.repository = repository
        self.retries = retries
        self.backoff = backoff
        self._token = token
        register(token)
        self._client = httpx.Client(
            timeout=timeout,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": f"ci-evals/{__version__}",
            },
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def _request(self, method: str, url: str, **kwargs: Any) -> Any:
        """One API call under the project's retry policy (:mod:`ci_evals._util.retry`).

        Retried: lost connections, 5xx, and rate limiting, which GitHub answers with 429 or 403
        carrying ``retry-after`` or ``x-ratelimit-remaining: 0`` (then ``x-ratelimit-reset``), or
        neither (then a minute, as GitHub documents). A wait longer than ``MAX_WAIT`` is not
        waited for: the error says how long GitHub asked for.
        """
        import httpx

        if not url.startswith(self.api_url + "/"):
            raise GitHubError(f"refusing to send the token to {url.split('?')[0]!r}")
        policy = Backoff(
            base=self.backoff,
            cap=BACKOFF_CAP,
            max_retries=self.retries,
            max_retry_after=MAX_WAIT,
            deadline=time.monotonic() + DEADLINE,
        )
        while True:
            try:
                resp = self._client.request(method, url, **kwargs)
            except httpx.TransportError as exc:
                cause = cause_of(exc, url, self._client.timeout.read)
                wait = policy.next_wait() if cause.retry else None
                if wait is None:
                    raise GitHubError(f"{method} {_path(url)}: {cause.message}") from None
                time.sleep(wait)
                continue
            limited = _rate_limited(resp)
            if resp.status_code >= 500 or resp.status_code == 429 or limited:
                asked = retry_after(resp.headers)
                if limited and asked is None:
                    asked = SECONDARY_LIMIT_WAIT
                wait = policy.next_wait(asked if limited or resp.status_code == 429 else None)
                if wait is None:
                    why = (
                        f"rate limited by GitHub (it asks to wait {asked:.0f} s)"
                        if limited
                        else f"HTTP {resp.status_code} after {policy.retries + 1} tries"
                    )
                    raise GitHubError(
                        f"{method} {_path(url)}: {why}", resp.status_code, rate_limited=limited
                    )
                time.sleep(wait)
                continue
            if resp.status_code >= 400:
                raise GitHubError(
                    f"{method} {_path(url)}: HTTP {resp.status_code} {scrub_and_shorten(_message(resp), 200, [self._token])}",
                    resp.status_code,
                )
            return resp

    def own_login(self) -> str:
        """The login comments made with this token carry: ``GET /user`` for a user's token; an
        installation token (the workflow's ``GITHUB_TOKEN``, a GitHub App's) may not read
        ``/user`` (403), and GitHub documents its comments as by ``github-actions[bot]``."""
        try:
            user = self._request("GET", f"{self.api_url}/user").json()
        except GitHubError as exc:
            if exc.status in (403, 404):
                return ACTIONS_BOT
            raise
        login = user.get("login") if isinstance(user, dict) else None
        if not isinstance(login, str) or not login:
            raise GitHubError("GET /user: the reply names no login")
        return login

    def find_comment(self, number: int, marker: str, *, ours: bool = True) -> dict[str, Any] | None:
        """The first comment on issue/PR ``number`` written with this token that starts with ``marker``.

        Only the start counts: a marker quoted inside another comment (model output, a human
        pasting a report) must not make us overwrite that comment. Only our own comments count:
        anyone can post a comment starting with the marker, and we must not edit theirs. Our
        login is looked up only once a comment carries the marker.
        """
        author: str | None = None
        url: str | None = (
            f"{self.api_url}/repos/{self.repository}/issues/{number}/comments?per_page=100"
        )
        for _ in range(MAX_PAGES):
            if url is None:
                return None
            resp = self._request("GET", url)
            for comment in resp.json():
                if not (comment.get("body") or "").lstrip().startswith(marker):
                    continue
                if ours and author is None:
                    author = self.own_login()
                if _by(comment, author):
                    return comment
            url = resp.links.get("next", {}).get("url")
        return None

    def pull_head(self, number: int) -> str | None:
        """The head commit sha of pull request ``number`` (None when GitHub does not say)."""
        pull = self._request("GET", f"{self.api_url}/repos/{self.repository}/pulls/{number}").json()
        sha = (pull.get("head") or {}).get("sha") if isinstance(pull, dict) else None
        return sha if isinstance(sha, str) else None

    def upsert(self, number: int, marker: str, body: str) -> dict[str, Any]:
        """Update the comment carrying ``marker`` or create one; returns GitHub's comment object."""
        existing = self.find_comment(number, marker)
        if existing is not None:
            url = f"{self.api_url}/repos/{self.repository}/issues/comments/{existing['id']}"
            return self._request("PATCH", url, json={"body": body}).json()
        url = f"{self.api_url}/repos/{self.repository}/issues/{number}/comments"
        return self._request("POST", url, json={"body": body}).json()


def _by(comment: dict[str, Any], author: str | None) -> bool:
    """The comment was written by ``author`` (any author when None); a ``[bot]`` login must be a Bot."""
    if author is None:
        return True
    user = comment.get("user")
    if not isinstance(user, dict):
        user = {}
    login = user.get("login")
    if not isinstance(login, str) or login.lower() != author.lower():
        return False
    return not author.endswith("[bot]") or user.get("type") == "Bot"


def _rate_limited(resp: Any) -> bool:
    """GitHub's primary or secondary rate limit (403 or 429), told apart from a permissions 403."""
    if resp.status_code not in (403, 429):
        return False
    if (
        resp.headers.get("retry-after") is not None
        or resp.headers.get("x-ratelimit-remaining") == "0"
    ):
        return True
    return "rate limit" in _message(resp).lower()


def _path(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).path


def _message(resp: Any) -> str:
    try:
        return str(resp.json().get("message", ""))
    except (ValueError, AttributeError):
        return ""


def _hint(status: int | None) -> str:
    if status == 403:
        return (
            " (a pull request from a fork gets a read-only token; see the README on workflow_run)"
        )
    if status == 401:
        return " (the token was rejected)"
    if status == 404:
        return " (check `permissions: pull-requests: write` and the repository)"
    return ""


def upsert_pr_comment(
    body: str,
    marker: str,
    *,
    token: str | None,
    repository: str | None,
    number: int | None,
    api_url: str | None = None,
    warn: Callable[[str], None] = print,
    retries: int = 3,
    backoff: float = 1.0,
    timeout: float = 30.0,
    head_sha: str | None = None,
) -> str | None:
    """Create or update the PR comment carrying ``marker``; its URL, or None after a warning.

    With ``head_sha`` (a ``workflow_run``'s commit) the pull request must have that head commit:
    a PR number taken from an artifact is untrusted, and must not aim the comment elsewhere.
    """
    if not token:
        warn("no GitHub token: the PR comment was not posted (set the github-token input)")
        return None
    if not repository or number is None:
        warn("no pull request found in the event payload: the PR comment was not posted")
        return None
    if len(body) > GITHUB_LIMIT:
        body = body[: GITHUB_LIMIT - 40] + "\n… (truncated to GitHub's limit)\n"
    client = CommentClient(
        token, repository, api_url=api_url, retries=retries, backoff=backoff, timeout=timeout
    )
    try:
        if head_sha is not None:
            actual = client.pull_head(number)
            if actual != head_sha:
                warn(
                    f"pull request #{number} has head {str(actual)[:12]}, not this run's commit "
                    f"{head_sha[:12]}: the PR comment was not posted"
                )
                return None
        comment = client.upsert(number, marker, body)
    except GitHubError as exc:
        warn(f"could not post the PR comment: {exc}{'' if exc.rate_limited else _hint(exc.status)}")
        return None
    except Exception as exc:  # a malformed reply must not cost the user their gate result
        warn(f"could not post the PR comment: {type(exc).__name__}")
        return None
    finally:
        client.close()
    return comment.get("html_url") or comment.get("url")
