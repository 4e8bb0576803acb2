"""Which way a call takes through the openai SDK (ci_evals.llm.transport), over real HTTP.

The aiohttp direct path must send ci-evals' own identity with the key and JSON the SDK sends, be
used only where it applies (no proxy from the environment, no user:password in the URL), and
close with the client.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from ci_evals import __version__
from ci_evals.llm import transport
from ci_evals.llm.answers import identity_headers
from ci_evals.llm.client import LLM
from tests.fakes.openai_server import FakeOpenAI, openai_server  # noqa: F401

KEY = "sk-transport-key-123456"
HELLO = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch):
    for name in (
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)


def one_call(url: str, *, sdk_post: bool = False):
    """(whether the aiohttp direct path was used, the answer's content, the session after close)."""

    async def go():
        llm = LLM(base_url=url, api_key_env="TRANSPORT_KEY")
        await llm.start()
        direct = llm._client.direct
        used = transport.has_session(llm._client)
        result = await llm.chat(model="m", messages=HELLO)
        await llm.aclose()
        return used, result.content, direct.session if direct is not None else None

    return asyncio.run(go())


def test_aiohttp_direct_path_sends_its_own_identity_and_the_sdks_body(openai_server, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TRANSPORT_KEY", KEY)
    openai_server.script("answer")
    used, content, session = one_call(openai_server.url)
    assert (used, content) == (True, "answer")
    assert session.closed is True
    [req] = openai_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.headers["content-type"] == "application/json"
    assert req.headers["user-agent"] == f"ci-evals/{__version__}"
    assert not [k for k in req.headers if k.lower().startswith("x-stainless")]
    assert req.body == {"model": "m", "messages": HELLO}


def test_sdk_post_sends_the_same_key_and_body_as_the_direct_path(openai_server, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TRANSPORT_KEY", KEY)
    one_call(openai_server.url)
    monkeypatch.setattr(transport, "DIRECT", False)
    one_call(openai_server.url)
    direct, sdk = openai_server.requests
    names = {"authorization", "content-type", "accept"}
    assert {k: direct.headers.get(k) for k in names} == {k: sdk.headers.get(k) for k in names}
    assert direct.body == sdk.body
    assert sdk.headers["user-agent"].startswith(
        "AsyncOpenAI/Python "
    )  # the SDK's own call names the SDK


def test_a_proxy_from_the_environment_goes_through_the_sdks_own_client(openai_server, monkeypatch):  # noqa: F811
    """aiohttp would ignore the proxy (it does not read the environment); the SDK's client honours it."""
    monkeypatch.setenv("TRANSPORT_KEY", KEY)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # bypassed here: the call still succeeds
    used, content, _ = one_call(openai_server.url)
    assert used is True  # the host is in NO_PROXY: direct
    monkeypatch.setenv("NO_PROXY", "example.invalid")
    assert transport._session(__import__("aiohttp"), openai_server.url, {}) is None


def test_a_url_with_userinfo_goes_through_httpx(openai_server, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TRANSPORT_KEY", KEY)
    url = openai_server.url.replace("http://", "http://user:pw@")
    used, content, session = one_call(url)
    assert (used, session) == (False, None)
    assert openai_server.requests[0].path == "/v1/chat/completions"


def test_the_aiohttp_path_trusts_what_the_sdks_http_library_trusts(monkeypatch, tmp_path):
    """Certificates verified, host names checked, and ``SSL_CERT_FILE`` honoured, as in the SDK's client."""
    import ssl

    import certifi

    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    ctx = transport._ssl_context()
    assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_REQUIRED, True)
    with open(certifi.where(), encoding="ascii") as fh:
        certs = fh.read().count("BEGIN CERTIFICATE")
    assert ctx.cert_store_stats()["x509_ca"] == certs
    one = tmp_path / "one.pem"
    with open(certifi.where(), encoding="ascii") as fh:
        one.write_text(
            "-----BEGIN CERTIFICATE-----" + fh.read().split("-----BEGIN CERTIFICATE-----")[1]
        )
    monkeypatch.setenv("SSL_CERT_FILE", str(one))
    assert transport._ssl_context().cert_store_stats()["x509_ca"] == 1


@pytest.mark.parametrize("org", [None, "org-123"])
def test_the_direct_paths_credentials_are_the_sdks_own(monkeypatch, org):
    """identity_headers() is read without importing the SDK: the key, the organization and the
    project must stay what AsyncOpenAI sends (checked against the installed SDK); the identity is
    ci-evals' own, with none of the SDK's X-Stainless-* telemetry."""
    from openai import AsyncOpenAI

    for name, value in (("OPENAI_ORG_ID", org), ("OPENAI_PROJECT_ID", org and "proj-9")):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)

    async def sdk():
        client = AsyncOpenAI(api_key=KEY, base_url="http://127.0.0.1:9/v1", max_retries=0)
        try:
            return {
                k: v
                for k, v in {**client.default_headers, **client.auth_headers}.items()
                if isinstance(v, str)
            }
        finally:
            await client.close()

    theirs, ours = asyncio.run(sdk()), identity_headers(KEY)
    kept = {
        k: v
        for k, v in theirs.items()
        if not k.lower().startswith("x-stainless") and k != "User-Agent"
    }
    assert ours == {**kept, "User-Agent": f"ci-evals/{__version__}"}


def test_the_direct_path_does_not_import_the_sdk(openai_server):  # noqa: F811
    """``import openai`` costs about a CPU-second; a run on the aiohttp path never pays it."""
    import subprocess
    import sys

    code = (
        "import asyncio, sys\nfrom ci_evals.llm.client import LLM\n"
        "async def go():\n"
        f"    llm = LLM(base_url={openai_server.url!r})\n"
        "    r = await llm.chat(model='m', messages=[{'role': 'user', 'content': 'hi'}])\n"
        "    await llm.aclose()\n"
        "    return r.content\n"
        "print(asyncio.run(go()), 'openai' in sys.modules)\n"
    )
    openai_server.script("fine")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in __import__("os").environ.items() if "proxy" not in k.lower()},
    )
    assert (out.returncode, out.stdout) == (0, "fine False\n"), out.stderr[-2000:]


def test_the_request_body_is_json_that_reads_back_as_the_body():
    body = {
        "model": "m",
        "temperature": 0.7,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": 'héllo \u2028 "quoted" \\ ✓ 🎉'}],
    }
    payload = transport._payload(body)
    assert payload.startswith(b'{"model":"m"')  # orjson's compact form
    assert json.loads(payload) == body


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "seed": 2**70},  # orjson writes 64-bit integers only
        {"model": "m", "messages": [{"role": "user", "content": "lone \ud800 surrogate"}]},
        {"model": "m", "logit_bias": {50256: -100}},  # a key that is not a string
    ],
    ids=["big-int", "lone-surrogate", "int-key"],
)
def test_what_orjson_refuses_is_written_by_json_as_before(body):
    assert transport._payload(body) == json.dumps(body).encode("utf-8")


@pytest.mark.parametrize(
    "raw, expected",
    [
        (
            b'{"choices": [{"message": {"content": "ok \\u00e9"}}]}',
            {"choices": [{"message": {"content": "ok é"}}]},
        ),
        (
            b'{"n": 123456789012345678901234567890}',
            {"n": 123456789012345678901234567890},
        ),  # exact, as json reads it
        ('{"a": "ü"}'.encode("utf-16"), {"a": "ü"}),  # json detects UTF-16; orjson reads only UTF-8
        (b'{"a": "\\ud800"}', {"a": "\ud800"}),
        (b"<html>bad gateway</html>", None),
        (b"", None),
    ],
    ids=["usual", "big-int", "utf-16", "lone-surrogate", "not-json", "empty"],
)
def test_a_response_body_reads_as_json_reads_it(raw, expected):
    assert transport._json_or_none(raw) == expected


def test_a_response_with_nan_reads_as_json_reads_it():
    data = transport._json_or_none(b'{"score": NaN}')
    assert data is not None and data["score"] != data["score"]


@pytest.mark.parametrize(
    "value,expected",
    [
        ("123", 123),
        ("0", 0),
        ("", None),
        (None, None),
        ("1.5", None),
        ("-1", None),
        (" 12", None),
        ("²", None),
        ("٣", None),
    ],
)
def test_a_body_length_is_read_only_from_ascii_digits(value, expected):
    from multidict import CIMultiDict

    from ci_evals._util.bounds import announced_length

    headers = CIMultiDict({} if value is None else {"Content-Length": value})
    assert announced_length(headers) == expected
    assert announced_length({} if value is None else {"content-length": value}) == expected
