"""Write (or with --check, compare) tests/data/github_openapi.json: the part of GitHub's published
OpenAPI description (npm ``@octokit/openapi``, ``generated/api.github.com.json``) that ci-evals'
GitHub client (ci_evals.reports.github) calls, for tests/test_supply_github.py to check against
offline.

The package is pinned (VERSION, INTEGRITY); the tarball is downloaded from the npm registry and
its sha512 checked before anything is read. The extract is an OpenAPI document of its own: the
operations we call (parameters inlined, the JSON request body, the JSON responses of the status
codes we read), the component schemas they reach and nothing else, with the annotations (prose,
examples, ``x-`` extensions) dropped. To move to a newer release: set VERSION and INTEGRITY to the
registry's ``dist.integrity`` of it, run the script, run the test. Needs the network.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import sys
import tarfile
import urllib.request
from pathlib import Path
from typing import Any

PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"
INTEGRITY = "sha512-pV8M7L9GY23AybNvTmo2nyjmpmnt6+2sRE/tqr0ZLQcPS4lnw7u5eZGNmwRNkBC3D7gZXbFx5AHzLUVRBXGDhg=="
REGISTRY = "https://registry.npmjs.org"
MEMBER = "package/generated/api.github.com.json"
OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "github_openapi.json"
OPERATIONS = [
    ("get", "/user"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("patch", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}"),
]
"""The calls of ci_evals.reports.github.CommentClient (method, path template)."""
STATUSES = ("200", "201", "403", "404", "422")
"""The answers it reads: the success bodies, and the error bodies whose message it reports."""
ANNOTATIONS = {"description", "example", "examples", "title", "summary", "externalDocs"}
SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "definitions"}
"""Keywords whose value maps names (any name, "description" included) to schemas."""


def tarball_url(version: str = VERSION) -> str:
    return f"{REGISTRY}/{PACKAGE}/-/{PACKAGE.split('/')[1]}-{version}.tgz"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as resp:  # noqa: S310 (a fixed https URL)
        data: bytes = resp.read()
    return data


def integrity_of(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def download() -> tuple[dict[str, Any], dict[str, Any]]:
    """The registry's ``dist`` of VERSION and the package's description, both checked."""
    dist = json.loads(_get(f"{REGISTRY}/{PACKAGE}/{VERSION}"))["dist"]
    if dist.get("integrity") != INTEGRITY or dist.get("tarball") != tarball_url():
        raise SystemExit(
            f"the registry's dist of {PACKAGE}@{VERSION} is not the pinned one: {dist}"
        )
    data = _get(dist["tarball"])
    if integrity_of(data) != INTEGRITY:
        raise SystemExit(f"{dist['tarball']}: sha512 mismatch")
    if hashlib.sha1(data).hexdigest() != dist.get("shasum"):  # noqa: S324 (npm's own shasum)
        raise SystemExit(f"{dist['tarball']}: shasum mismatch")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        member = tar.extractfile(MEMBER)
        if member is None:
            raise SystemExit(f"{MEMBER} is not in the tarball")
        spec = json.load(member)
    return dist, spec


def _schema(node: Any) -> Any:
    """A schema without its annotations (prose, examples, ``x-`` extensions)."""
    if isinstance(node, list):
        return [_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ANNOTATIONS or key.startswith("x-"):
            continue
        if key in SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _schema(sub) for name, sub in value.items()}
        elif key in ("enum", "default", "const", "discriminator", "required"):
            out[key] = value
        else:
            out[key] = _schema(value)
    return out


def _deref(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` itself, or the component its ``$ref`` names (parameters, responses)."""
    while "$ref" in node:
        kind, name = node["$ref"].removeprefix("#/components/").split("/")
        node = spec["components"][kind][name]
    return node


def _json_schema(content: dict[str, Any] | None) -> Any:
    media = (content or {}).get("application/json")
    return _schema(media["schema"]) if media and "schema" in media else None


def _operation(spec: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": op["operationId"], "parameters": []}
    for ref in op.get("parameters", []):
        param = _deref(spec, ref)
        keep = {k: param[k] for k in ("name", "in", "required") if k in param}
        out["parameters"].append({**keep, "schema": _schema(param["schema"])})
    if "requestBody" in op:
        body = _deref(spec, op["requestBody"])
        schema = _json_schema(body.get("content"))
        out["requestBody"] = {
            "required": body.get("required", False),
            "content": {"application/json": {"schema": schema}},
        }
    out["responses"] = {}
    for status in STATUSES:
        if status in op["responses"]:
            answer = _deref(spec, op["responses"][status])
            schema = _json_schema(answer.get("content"))
            entry: dict[str, Any] = {"description": answer.get("description", "")}
            if schema is not None:
                entry["content"] = {"application/json": {"schema": schema}}
            out["responses"][status] = entry
    return out


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                found.add(value)
            else:
                _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def extract(spec: dict[str, Any], dist: dict[str, Any]) -> dict[str, Any]:
    """The extract: our operations and the closure of the component schemas they reference."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path in OPERATIONS:
        paths.setdefault(path, {})[method] = _operation(spec, spec["paths"][path][method])
    schemas: dict[str, Any] = {}
    todo: set[str] = set()
    _refs(paths, todo)
    while todo:
        ref = todo.pop()
        prefix = "#/components/schemas/"
        if not ref.startswith(prefix):
            raise SystemExit(f"unexpected $ref {ref}")
        name = ref.removeprefix(prefix)
        if name not in schemas:
            schemas[name] = _schema(spec["components"]["schemas"][name])
            _refs(schemas[name], todo)
    return {
        "openapi": spec["openapi"],
        "info": {"title": spec["info"]["title"], "version": spec["info"]["version"]},
        "x-source": {
            "package": f"{PACKAGE}@{VERSION}",
            "file": MEMBER.removeprefix("package/"),
            "tarball": dist["tarball"],
            "integrity": dist["integrity"],
            "shasum": dist["shasum"],
            "license": "MIT (Octokit contributors)",
            "generator": "scripts/github_openapi.py",
        },
        "paths": paths,
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help=f"fail when {OUT.name} drifted")
    args = parser.parse_args(argv)
    dist, spec = download()
    text = render(extract(spec, dist))
    if args.check:
        if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is not what {PACKAGE}@{VERSION} gives: run python {sys.argv[0]}")
            return 1
        print(f"{OUT.name} matches {PACKAGE}@{VERSION}")
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({len(text)} bytes) from {PACKAGE}@{VERSION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
