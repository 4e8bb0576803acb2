"""Issue 41, item 5: the GitHub calls (the PR comment's upsert, the pull request's head lookup)
checked against GitHub's published OpenAPI description.

tests/data/github_openapi.json is the part of ``@octokit/openapi`` (npm; version, tarball and
sha512 in its ``x-source``) that ci_evals.reports.github calls, written by
``scripts/github_openapi.py`` (``--check`` compares it with the package). The real client runs
against the fake GitHub of ``tests/fakes/github_server.py``; every request it sends must match
exactly one operation (method and path, the path parameters typed and naming the repository),
carry only query parameters that operation defines, with valid values, and a JSON body valid
against its request body schema. The schemas are OpenAPI 3.0: :func:`json_schema` turns them into
JSON Schema 2020-12 (``nullable``) and makes every object schema forbid unknown keys. The fake's
answers are held to the response schemas the same way, so it stays GitHub's shape. A mutated
request (an unknown key, a wrong type, a wrong path, a bad query parameter) must fail: the
mutation tests hold the checker to that.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest
from jsonschema import Draft202012Validator, FormatChecker, ValidationError

from ci_evals.reports.github import CommentClient, GitHubError, upsert_pr_comment
from tests.fakes import github_objects as objects
from tests.fakes.github_server import FakeGitHub, Request, github_server_fixture  # noqa: F401

SPEC = json.loads((Path(__file__).parent / "data" / "github_openapi.json").read_text("utf-8"))
MARK = "<!-- ci-evals:qa:evals:0a36caf84d28241f -->"
SHA = "a" * 40
LIST = "/repos/octo/widgets/issues/7/comments"
OPERATIONS = {
    ("GET", "/user"): "users/get-authenticated",
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments"): "issues/list-comments",
    ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments"): "issues/create-comment",
    ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}"): "issues/update-comment",
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}"): "pulls/get",
}
"""What CommentClient calls."""


# --- the checker ---------------------------------------------------------------------------------


def json_schema(node: Any) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema 2020-12 (``nullable`` as a ``null`` type), every object
    schema closed (``additionalProperties: false`` unless it says otherwise)."""
    if isinstance(node, list):
        return [json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties"):
            out[key] = {name: json_schema(sub) for name, sub in value.items()}
        elif key in ("enum", "default", "required", "const"):
            out[key] = value
        elif key not in ("nullable", "discriminator"):
            out[key] = json_schema(value)
    if out.get("type") == "object" or "properties" in out:
        out.setdefault("additionalProperties", False)
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


FORMATS = FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    pattern = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"
    return bool(re.fullmatch(pattern, value) and datetime.fromisoformat(value))


@FORMATS.checks("uri")
def _uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(parts.scheme and parts.netloc) and " " not in value


COMPONENTS = {"schemas": {k: json_schema(v) for k, v in SPEC["components"]["schemas"].items()}}
_VALIDATORS: dict[str, Draft202012Validator] = {}


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of ``schema`` whose ``#/components/schemas/...`` refs reach the extract's."""
    key = json.dumps(schema, sort_keys=True)
    if key not in _VALIDATORS:
        root = {**json_schema(schema), "components": COMPONENTS}
        Draft202012Validator.check_schema(root)
        _VALIDATORS[key] = Draft202012Validator(root, format_checker=FORMATS)
    return _VALIDATORS[key]


def _value(raw: str, schema: dict[str, Any]) -> Any:
    """A path or query parameter's text as the type its schema names (ours: integer, string)."""
    if schema.get("type") == "integer":
        assert re.fullmatch(r"-?[0-9]+", raw), f"{raw!r} is not an integer"
        return int(raw)
    return raw


def _template(path: str) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)\}", path)
    return re.compile(
        "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/]+)" for i, p in enumerate(parts))
    )


def operation(method: str, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The one operation of the extract that ``method path`` calls, and its path parameters."""
    found = []
    for template, item in SPEC["paths"].items():
        match = _template(template).fullmatch(path)
        op = item.get(method.lower())
        if match is None or op is None:
            continue
        params: dict[str, Any] = {}
        try:
            for param in op["parameters"]:
                if param["in"] == "path":
                    params[param["name"]] = _value(unquote(match[param["name"]]), param["schema"])
                    validator(param["schema"]).validate(params[param["name"]])
        except (AssertionError, ValidationError):
            continue
        found.append((op, params))
    assert len(found) == 1, f"{method} {path} is {len(found)} operations of GitHub's REST API"
    return found[0]


def check_request(req: Request, repository: str = "octo/widgets") -> str:
    """Raises (AssertionError, ValidationError) unless ``req`` is a valid call; its operationId."""
    op, params = operation(req.method, req.path)
    if "owner" in params:
        assert f"{params['owner']}/{params['repo']}" == repository, req.path
    query = parse_qsl(req.raw_query, keep_blank_values=True, strict_parsing=bool(req.raw_query))
    defined = {p["name"]: p for p in op["parameters"] if p["in"] == "query"}
    names = [name for name, _ in query]
    assert len(set(names)) == len(names), f"a query parameter repeated: {req.raw_query}"
    for name, raw in query:
        assert name in defined, f"{name!r} is no query parameter of {op['operationId']}"
        validator(defined[name]["schema"]).validate(_value(raw, defined[name]["schema"]))
    missing = {n for n, p in defined.items() if p.get("required")} - set(names)
    assert not missing, f"required query parameters {missing} missing"
    body = op.get("requestBody")
    if body is None:
        assert req.body is None, f"{op['operationId']} takes no body"
    elif req.body is not None or body["required"]:
        assert (req.content_type or "").split(";")[0] == "application/json", req.content_type
        validator(body["content"]["application/json"]["schema"]).validate(req.body)
    return str(op["operationId"])


def check_answer(req: Request) -> None:
    """Raises unless the fake's answer to ``req`` is one GitHub's description gives that call."""
    op, _ = operation(req.method, req.path)
    assert str(req.status) in op["responses"], f"{op['operationId']} defines no {req.status}"
    validator(op["responses"][str(req.status)]["content"]["application/json"]["schema"]).validate(
        req.answer
    )


def rejection(check: Any, req: Request) -> str | None:
    """Why ``check`` rejects ``req`` (the first line of its error), or None when it passes."""
    try:
        check(req)
    except (AssertionError, ValidationError) as exc:
        return str(exc).splitlines()[0]
    return None


# --- the extract ---------------------------------------------------------------------------------


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set().union(*(_refs(v) for v in node.values()), {node.get("$ref")} - {None})
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def test_extract_names_its_source_and_holds_exactly_our_operations_and_their_closure():
    assert SPEC["x-source"] == {
        "package": "@octokit/openapi@23.0.2",
        "file": "generated/api.github.com.json",
        "tarball": "https://registry.npmjs.org/@octokit/openapi/-/openapi-23.0.2.tgz",
        "integrity": "sha512-pV8M7L9GY23AybNvTmo2nyjmpmnt6+2sRE/tqr0ZLQcPS4lnw7u5eZGNmwRNkBC3D7gZ"
        "XbFx5AHzLUVRBXGDhg==",
        "shasum": "743435033357133786d56271b48a67991a614b0a",
        "license": "MIT (Octokit contributors)",
        "generator": "scripts/github_openapi.py",
    }
    assert SPEC["openapi"] == "3.0.3"
    ops = {
        (m.upper(), p): op["operationId"]
        for p, item in SPEC["paths"].items()
        for m, op in item.items()
    }
    assert ops == OPERATIONS
    reached, todo = set(), _refs(SPEC["paths"])
    while todo:
        ref = todo.pop()
        name = ref.removeprefix("#/components/schemas/")
        if name not in reached:
            reached.add(name)
            todo |= _refs(SPEC["components"]["schemas"][name])
    assert reached == set(SPEC["components"]["schemas"]) and len(reached) == 21


def test_nullable_becomes_a_null_type_and_objects_are_closed():
    field = {"type": "string", "nullable": True, "enum": ["x"]}
    assert json_schema({"type": "object", "nullable": True, "properties": {"a": field}}) == {
        "type": ["object", "null"],
        "properties": {"a": {"type": ["string", "null"], "enum": ["x", None]}},
        "additionalProperties": False,
    }
    user = validator({"$ref": "#/components/schemas/nullable-simple-user"})
    user.validate(None)
    user.validate(objects.user("octocat"))
    assert not user.is_valid({**objects.user("octocat"), "karma": 1})
    assert not user.is_valid({**objects.user("octocat"), "avatar_url": "not a uri"})
    assert not user.is_valid({**objects.user("octocat"), "gravatar_id": 0})


# --- the real client's requests ------------------------------------------------------------------


def sent(gh: FakeGitHub) -> list[tuple[str, str, str]]:
    """Every request, checked, with the fake's answer checked: (method, path?query, operationId)."""
    out = []
    for req in gh.log:
        op = check_request(req, gh.repo)
        check_answer(req)
        out.append((req.method, req.path + ("?" + req.raw_query if req.raw_query else ""), op))
    return out


def test_a_new_comment_after_the_head_lookup(github_server):
    gh, warnings = github_server, []
    gh.pulls[7] = SHA
    url = upsert_pr_comment(
        MARK + "\nbody", MARK, token=gh.token, repository=gh.repo, number=7,
        api_url=gh.url, warn=warnings.append, head_sha=SHA,
    )  # fmt: skip
    assert warnings == [] and url == gh.comments[7][0]["html_url"]
    assert sent(gh) == [
        ("GET", "/repos/octo/widgets/pulls/7", "pulls/get"),
        ("GET", f"{LIST}?per_page=100", "issues/list-comments"),
        ("POST", LIST, "issues/create-comment"),
    ]
    assert gh.log[-1].body == {"body": MARK + "\nbody"} and gh.log[-1].status == 201


def test_an_update_found_on_the_second_page(github_server):
    gh, warnings = github_server, []
    gh.user_login = "ci-bot-user"
    gh.add_comments(
        7, [f"comment {i}" for i in range(100)], author={"login": "octocat", "type": "User"}
    )
    gh.add_comments(7, [MARK + "\nplanted"], author={"login": "mallory", "type": "User"})
    ours = gh.add_comments(7, [MARK + "\nold"])[0]
    url = upsert_pr_comment(
        MARK + "\nnew", MARK, token=gh.token, repository=gh.repo, number=7,
        api_url=gh.url, warn=warnings.append,
    )  # fmt: skip
    assert warnings == [] and url == ours["html_url"]
    assert sent(gh) == [
        ("GET", f"{LIST}?per_page=100", "issues/list-comments"),
        ("GET", f"{LIST}?per_page=100&page=2", "issues/list-comments"),
        ("GET", "/user", "users/get-authenticated"),
        ("PATCH", f"/repos/octo/widgets/issues/comments/{ours['id']}", "issues/update-comment"),
    ]
    assert [len(r.answer) for r in gh.log[:2]] == [100, 2]
    assert gh.log[-1].body == {"body": MARK + "\nnew"} and gh.log[-1].status == 200


def test_the_error_answers_the_client_reads(github_server):
    """403 (a fork's read-only token; /user with an installation token), 404 and 422 bodies."""
    gh = github_server
    client = CommentClient(gh.token, gh.repo, api_url=gh.url, retries=0)
    try:
        assert client.own_login() == "github-actions[bot]"  # 403 from GET /user
        with pytest.raises(GitHubError, match="HTTP 404"):
            client.pull_head(99)
        with pytest.raises(GitHubError, match="HTTP 422 Validation Failed"):
            client.upsert(7, MARK, "x" * 70_000)
        gh.forbidden = True
        with pytest.raises(GitHubError, match="HTTP 403 Resource not accessible by integration"):
            client.upsert(7, MARK, "body")
    finally:
        client.close()
    assert [(r.method, r.status) for r in gh.log] == [
        ("GET", 403), ("GET", 404), ("GET", 200), ("POST", 422), ("GET", 200), ("POST", 403),
    ]  # fmt: skip
    sent(gh)


# --- the checker fails on a mutated call ---------------------------------------------------------


@pytest.fixture(name="post")
def post_fixture(github_server) -> Request:
    gh = github_server
    assert upsert_pr_comment(
        "hi", MARK, token=gh.token, repository=gh.repo, number=7, api_url=gh.url
    )
    check_request(gh.log[-1])
    return gh.log[-1]


GET = {"method": "GET", "body": None}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"body": {"body": "hi", "bodyy": "x"}}, "Additional properties are not allowed ('bodyy'"),
        ({"body": {"body": 3}}, "3 is not of type 'string'"),
        ({"body": {"body": None}}, "None is not of type 'string'"),
        ({"body": {}}, "'body' is a required property"),
        ({"body": None}, "None is not of type 'object'"),
        ({"body": ["hi"]}, "['hi'] is not of type 'object'"),
        ({"content_type": "text/plain"}, "text/plain"),
        ({"path": "/repos/octo/widgets/issues/7/comment"}, "is 0 operations"),
        ({"path": "/repos/octo/widgets/issue/7/comments"}, "is 0 operations"),
        ({"path": "/repos/octo/widgets/issues/seven/comments"}, "is 0 operations"),
        ({"path": "/repos/octo/widgets/issues/7.0/comments"}, "is 0 operations"),
        ({"path": LIST + "/"}, "is 0 operations"),
        ({"path": LIST.replace("widgets", "gadgets")}, "/repos/octo/gadgets/issues/7/comments"),
        ({"method": "PUT"}, "PUT /repos/octo/widgets/issues/7/comments is 0 operations"),
        ({**GET, "raw_query": "per_page=abc"}, "'abc' is not an integer"),
        ({**GET, "raw_query": "per_page=100&perpage=1"}, "'perpage' is no query parameter"),
        ({**GET, "raw_query": "per_page=100&per_page=100"}, "a query parameter repeated"),
        ({**GET, "raw_query": "page=true"}, "'true' is not an integer"),
        ({**GET, "raw_query": "since=yesterday"}, "'yesterday' is not a 'date-time'"),
        ({"method": "GET"}, "issues/list-comments takes no body"),
    ],
)
def test_a_mutated_request_is_rejected(post, change, reason):
    assert reason in (rejection(check_request, replace(post, **change)) or "passed")


def test_the_unmutated_neighbours_pass(post):
    """The mutation tests' control: the same call with valid variations is accepted."""
    listing = replace(post, method="GET", body=None, content_type=None)
    for query in ("", "per_page=100", "per_page=100&page=2", "since=2026-01-05T09:30:00Z"):
        assert check_request(replace(listing, raw_query=query)) == "issues/list-comments"
    edit = replace(post, method="PATCH", path="/repos/octo/widgets/issues/comments/1001")
    assert check_request(edit) == "issues/update-comment"
    assert check_request(replace(post, body={"body": ""})) == "issues/create-comment"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"reactions_count": 0}, "Additional properties are not allowed ('reactions_count'"),
        ({"node_id": None}, "'node_id' is a required property"),
        ({"id": "1001"}, "'1001' is not of type 'integer'"),
        ({"created_at": "yesterday"}, "'yesterday' is not a 'date-time'"),
        ({"html_url": "pull/7"}, "'pull/7' is not a 'uri'"),
        ({"user": {"login": "x", "type": "User"}}, "'avatar_url' is a required property"),
        ({"author_association": "STRANGER"}, "'STRANGER' is not one of"),
    ],
)
def test_a_mutated_answer_is_rejected(post, change, reason):
    check_answer(post)
    answer = {k: v for k, v in {**post.answer, **change}.items() if v is not None}
    assert reason in (rejection(check_answer, replace(post, answer=answer)) or "passed")


def test_the_pull_answer_is_checked_too(post):
    assert rejection(check_answer, replace(post, answer={**post.answer, "user": None})) is None
    pull = replace(post, method="GET", path="/repos/octo/widgets/pulls/7", body=None, status=200)
    answer = objects.pull("octo/widgets", 7, SHA)
    assert rejection(check_answer, replace(pull, answer=answer)) is None
    old_fake = {"number": 7, "head": {"sha": SHA}}  # what the fake answered before
    assert "is a required property" in str(rejection(check_answer, replace(pull, answer=old_fake)))
    assert (
        rejection(check_answer, replace(pull, status=201, answer=answer))
        == "pulls/get defines no 201"
    )
