"""Issue 41, item 5: the request bodies ci-evals builds itself, checked against the providers' own
published definitions (the vendor SDKs' parameter types), and recorded answers, error bodies
included, parsed with the SDKs' response types.

The direct path (:mod:`ci_evals.llm.transport`) no longer goes through the SDK's request building,
so nothing else checks what it sends. Every body here is captured on the wire: the real model
target, rubric judge and embedding call against the fakes in ``tests/fakes`` (``server.bodies()``).

The SDKs' parameter types are TypedDicts, which ignore unknown keys and whose ``Iterable`` fields
pydantic validates lazily; :func:`strict` makes every TypedDict reachable from the root forbid
extra keys, validates in strict mode (no ``"0.5"`` for a float) and drains every lazy iterable, and
the top-level keys are also held to ``get_type_hints``. A mutated body (an unknown key, a wrong
type) must fail: the mutation tests hold the checker to that.
"""

from __future__ import annotations

import asyncio
import copy
import json
import typing
import urllib.request
from typing import Any, get_args, get_type_hints

import pytest
from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import is_typeddict

import ci_evals.llm.client as llm_client
from ci_evals.core.sample import Sample
from ci_evals.graders.rubric_modes import JSON_OBJECT, SCHEMA_FORMAT
from ci_evals.llm.client import LLM
from ci_evals.llm.providers import Google
from tests.fakes.openai_server import EMBEDDINGS, FakeOpenAI
from tests.fakes.vendor_servers import FakeAnthropic, FakeGemini

openai_params = pytest.importorskip("openai.types.chat.completion_create_params")
KEY = "sk-supply-requests-0123456789"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a city up.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
REPLY = {"score": 0.75, "rationale": "mostly right"}


@pytest.fixture(autouse=True)
def env(monkeypatch):
    monkeypatch.setattr(llm_client, "BACKOFF_BASE", 0.01)
    monkeypatch.setenv("SUPPLY_KEY", KEY)
    for name in (
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "GOOGLE_GEMINI_BASE_URL",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


# --- the checker ---------------------------------------------------------------------------------


def _typeddicts(tp: Any, seen: set) -> None:
    """Every TypedDict reachable from the annotation ``tp``."""
    if isinstance(tp, typing.ForwardRef | str):
        return
    if is_typeddict(tp):
        if tp not in seen:
            seen.add(tp)
            for hint in get_type_hints(tp).values():
                _typeddicts(hint, seen)
        return
    alias = getattr(tp, "__value__", None)  # a TypeAliasType
    if alias is not None:
        _typeddicts(alias, seen)
    for arg in get_args(tp):
        _typeddicts(arg, seen)


_ADAPTERS: dict[Any, TypeAdapter] = {}


def strict(tp: Any) -> TypeAdapter:
    """A TypeAdapter of ``tp`` whose TypedDicts (all of them, nested too) forbid unknown keys. The
    config is set only while the schema is built: the SDK's classes are left as they were."""
    if tp not in _ADAPTERS:
        seen: set = set()
        _typeddicts(tp, seen)
        before = {td: td.__dict__.get("__pydantic_config__") for td in seen}
        try:
            for td in seen:
                td.__pydantic_config__ = ConfigDict(
                    extra="forbid", arbitrary_types_allowed=True
                )  # (file uploads: IO)
            _ADAPTERS[tp] = TypeAdapter(tp)
        finally:
            for td, old in before.items():
                if old is None:
                    del td.__pydantic_config__
                else:
                    td.__pydantic_config__ = old
    return _ADAPTERS[tp]


def _drain(value: Any) -> None:
    """Consume every lazily validated iterable (pydantic validates ``Iterable[...]`` items on use)."""
    if isinstance(value, dict):
        for v in value.values():
            _drain(v)
    elif isinstance(value, list | tuple):
        for v in value:
            _drain(v)
    elif type(value).__name__ == "ValidatorIterator":
        for v in value:
            _drain(v)


def check(tp: Any, body: dict[str, Any]) -> None:
    """ValidationError (or AssertionError for an unknown top-level key) unless ``body`` is a ``tp``."""
    unknown = set(body) - set(get_type_hints(tp))
    assert not unknown, f"keys {sorted(unknown)} are not parameters of {tp.__name__}"
    _drain(strict(tp).validate_python(json.loads(json.dumps(body)), strict=True))


def rejects(tp: Any, body: dict[str, Any]) -> bool:
    try:
        check(tp, body)
    except (AssertionError, ValidationError):
        return True
    return False


def chat_params() -> Any:
    return openai_params.CompletionCreateParamsNonStreaming


def embedding_params() -> Any:
    from openai.types.embedding_create_params import EmbeddingCreateParams

    return EmbeddingCreateParams


def anthropic_params() -> Any:
    pytest.importorskip("anthropic")
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    return MessageCreateParamsNonStreaming


def check_gemini(body: dict[str, Any], *, with_model: bool) -> None:
    """A generateContent body against google-genai's models of its parts (they forbid extra keys;
    the REST names are their camelCase aliases). The request as a whole has no published model."""
    genai = pytest.importorskip("google.genai.types")
    allowed = {"contents", "systemInstruction", "generationConfig"} | (
        {"model"} if with_model else set()
    )
    unknown = set(body) - allowed
    assert not unknown, f"keys {sorted(unknown)} are not generateContent fields ci-evals sends"
    assert isinstance(body["contents"], list) and body["contents"]
    for content in body["contents"]:
        genai.Content.model_validate(content, strict=False)
    if "systemInstruction" in body:
        genai.Content.model_validate(body["systemInstruction"])
    if "generationConfig" in body:
        genai.GenerationConfig.model_validate(body["generationConfig"])
    if with_model:
        assert isinstance(body["model"], str)


# --- capturing what is really sent ---------------------------------------------------------------


def _run(coro_fn):
    return asyncio.run(coro_fn())


def _llm(url: str, provider: str = "openai") -> LLM:
    return LLM(base_url=url, api_key_env="SUPPLY_KEY", provider=provider, max_retries=0, timeout=10)


def openai_bodies() -> tuple[list[dict], list[dict], list[dict]]:
    """(chat bodies, embeddings bodies, the chat answers as received) from the real model target
    (tools, a system prompt, two turns after a tool call, a reasoning model's cap), the rubric
    judge's both response formats, and an embeddings call."""
    from tests.test_model_target import make as make_target
    from tests.test_model_target import run as run_target
    from tests.test_rubric_grader import grade
    from tests.test_rubric_grader import make as make_judge

    with FakeOpenAI() as server:
        import tempfile
        from pathlib import Path

        tmp = Path(tempfile.mkdtemp())
        base = {"base_url": server.url, "api_key_env": "SUPPLY_KEY", "max_retries": 0}
        server.script(
            {"content": None, "tool_calls": [{"name": "lookup", "arguments": {"city": "Paris"}}]},
            "done",
        )
        target = make_target(
            {
                **base,
                "model": "gpt-4o-mini",
                "system_prompt": "Be brief.",
                "tools": TOOLS,
                "temperature": 0.2,
                "max_tokens": 64,
            },
            tmp,
        )
        run_target(target, Sample(id=1, input=["Where is Paris?", "And then?"]))
        server.script("plain")
        run_target(
            make_target({**base, "model": "o3-mini", "max_tokens": 32}, tmp),
            Sample(id=2, input="hi"),
        )
        server.script(REPLY)
        grade(make_judge({**base, "prompt": "Judge {submission}", "model": "gpt-4o-mini"}, tmp))
        answers = []

        async def direct():
            llm = _llm(server.url)
            try:
                for fmt in (SCHEMA_FORMAT, JSON_OBJECT):
                    server.script(REPLY)
                    answers.append(
                        (
                            await llm.chat(
                                model="gpt-4o-mini",
                                messages=[
                                    {"role": "system", "content": "You grade."},
                                    {"role": "user", "content": "Grade it."},
                                ],
                                params={"temperature": 0.0, "max_tokens": None},
                                response_format=fmt,
                            )
                        ).data
                    )
                await llm.embed(
                    "text-embedding-3-large", ["Paris is the capital.", "The capital is Paris."]
                )
            finally:
                await llm.aclose()

        _run(direct)
        return server.bodies(), server.bodies(EMBEDDINGS), answers


@pytest.fixture(scope="module")
def captured() -> tuple[list[dict], list[dict], list[dict]]:
    import os

    os.environ["SUPPLY_KEY"] = KEY
    try:
        return openai_bodies()
    finally:
        os.environ.pop("SUPPLY_KEY", None)


# --- OpenAI-compatible: chat completions and embeddings ------------------------------------------


def test_every_chat_body_is_a_completion_create_params(captured):
    chats, _, _ = captured
    assert len(chats) == 6
    shapes = {
        "tools": 0,
        "json_schema": 0,
        "json_object": 0,
        "tool_message": 0,
        "max_completion_tokens": 0,
    }
    for body in chats:
        check(chat_params(), body)
        shapes["tools"] += "tools" in body
        shapes["max_completion_tokens"] += "max_completion_tokens" in body
        fmt = (body.get("response_format") or {}).get("type")
        if fmt in shapes:
            shapes[fmt] += 1
        shapes["tool_message"] += any(m["role"] == "tool" for m in body["messages"])
    assert all(shapes.values()), shapes  # every shape the code sends was captured and checked


def test_every_embeddings_body_is_an_embedding_create_params(captured):
    _, embeds, _ = captured
    assert embeds
    for body in embeds:
        check(embedding_params(), body)


@pytest.mark.parametrize(
    ("mutation", "where"),
    [
        (lambda b: b.update(temprature=0.2), "an unknown top-level key"),
        (lambda b: b.update(temperature="0.2"), "a float sent as a string"),
        (lambda b: b.update(max_tokens=1.5), "a fractional max_tokens"),
        (lambda b: b["messages"][0].update(text="hi"), "an unknown key in a message"),
        (lambda b: b["messages"][-1].update(content=7), "a message whose content is a number"),
        (lambda b: b["messages"][-1].update(role="judge"), "an unknown role"),
        (
            lambda b: b["tools"][0]["function"].update(parameterz={}),
            "an unknown key in a tool's function",
        ),
        (lambda b: b["tools"][0].update(type="fn"), "a tool of an unknown type"),
        (
            lambda b: b.update(
                response_format={"type": "json_schema", "json_schema": {"schema": {}}}
            ),
            "a json_schema format without its name",
        ),
        (lambda b: b.update(response_format={"type": "json"}), "an unknown response format"),
    ],
)
def test_a_mutated_chat_body_is_rejected(captured, mutation, where):
    chats, _, _ = captured
    body = copy.deepcopy(next(b for b in chats if "tools" in b and len(b["messages"]) > 2))
    check(chat_params(), body)
    mutation(body)
    assert rejects(chat_params(), body), where


@pytest.mark.parametrize(
    "mutation",
    [
        lambda b: b.update(input=[1.5]),
        lambda b: b.update(dimensions="3"),
        lambda b: b.update(inputs=["x"]),
    ],
)
def test_a_mutated_embeddings_body_is_rejected(captured, mutation):
    _, embeds, _ = captured
    body = copy.deepcopy(embeds[0])
    mutation(body)
    assert rejects(embedding_params(), body)


def test_recorded_answers_and_errors_parse_with_the_sdks_response_types(captured):
    from openai.types import CreateEmbeddingResponse
    from openai.types.chat import ChatCompletion
    from openai.types.shared import ErrorObject

    _, _, answers = captured
    for data in answers:
        ChatCompletion.model_validate(data)
    with FakeOpenAI() as server:
        embedding = _post(server.url + "/embeddings", {"model": "e", "input": ["a", "b"]})
        server.fault("500", first=1)
        status, error = _post_status(
            server.url + "/chat/completions", {"model": "m", "messages": []}
        )
    CreateEmbeddingResponse.model_validate(embedding)
    assert status == 500
    ErrorObject.model_validate(error["error"])
    with pytest.raises(ValidationError):
        ChatCompletion.model_validate(
            {**answers[0], "choices": [{"index": 0, "message": {"content": "x"}}]}
        )
    with pytest.raises(ValidationError):
        ErrorObject.model_validate({"message": 5})


def _post_status(url: str, body: dict) -> tuple[int, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {KEY}",
            "x-api-key": KEY,
            "anthropic-version": "2023-06-01",
            "x-goog-api-key": KEY,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _post(url: str, body: dict) -> Any:
    status, data = _post_status(url, body)
    assert status == 200, data
    return data


# --- Anthropic Messages ----------------------------------------------------------------------------


def anthropic_bodies() -> tuple[list[dict], str]:
    with FakeAnthropic() as server:

        async def go():
            llm = _llm(server.url, "anthropic")
            try:
                for fmt in (SCHEMA_FORMAT, None):
                    server.script(REPLY)
                    await llm.chat(
                        model="claude-sonnet-4-5",
                        messages=[
                            {"role": "system", "content": "You grade."},
                            {"role": "user", "content": "Grade it."},
                            {"role": "assistant", "content": "Ready."},
                            {"role": "user", "content": "Now."},
                        ],
                        params={"temperature": 0.0},
                        response_format=fmt,
                    )
            finally:
                await llm.aclose()

        _run(go)
        return server.bodies(), server.url


def test_every_anthropic_body_is_a_message_create_params(monkeypatch):
    monkeypatch.setenv("SUPPLY_KEY", KEY)
    params = anthropic_params()
    bodies, _ = anthropic_bodies()
    assert len(bodies) == 2 and "output_config" in bodies[0]
    # Held whole: anthropic 2.x's MessageCreateParams has no ``temperature`` (API 2026-10-21 took
    # the sampling parameters away), and ci-evals no longer sends one.
    for body in bodies:
        check(params, body)
    for mutate in (
        lambda b: b.update(max_tokens="4096"),
        lambda b: b["system"][0].update(cache="ephemeral"),
        lambda b: b["output_config"]["format"].update(type="json"),
        lambda b: b.update(top=1),
        lambda b: b.update(temperature=0.0),
        lambda b: b["messages"][0].update(role="judge"),
        lambda b: b["messages"][0].update(content=3),
    ):
        body = copy.deepcopy(bodies[0])
        mutate(body)
        assert rejects(params, body)


def test_anthropic_answers_and_errors_parse_with_the_sdks_types():
    pytest.importorskip("anthropic")
    from anthropic.types import ErrorResponse, Message

    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with FakeAnthropic() as server:
        Message.model_validate(_post(server.url.rstrip("/") + "/v1/messages", body))
        server.fault("overloaded", first=1)
        status, error = _post_status(server.url.rstrip("/") + "/v1/messages", body)
    assert status == 529
    ErrorResponse.model_validate(error)
    with pytest.raises(ValidationError):
        ErrorResponse.model_validate(
            {"type": "error", "error": {"type": "no_such_error", "message": "x"}}
        )


# --- Gemini generateContent ------------------------------------------------------------------------


def test_every_gemini_body_is_made_of_google_genais_models(monkeypatch):
    monkeypatch.setenv("SUPPLY_KEY", KEY)
    pytest.importorskip("google.genai")
    messages = [
        {"role": "system", "content": "You grade."},
        {"role": "user", "content": "Grade it."},
        {"role": "assistant", "content": "Ready."},
        {"role": "user", "content": "Now."},
    ]
    built = [
        Google().request("gemini-2.5-flash", messages, {"temperature": 0.0}, fmt)[1]
        for fmt in (SCHEMA_FORMAT, JSON_OBJECT, None)
    ]
    for body in built:  # what ci-evals builds (and keys its cache with)
        check_gemini(body, with_model=True)
    with FakeGemini() as server:

        async def go():
            llm = _llm(server.url, "google")
            try:
                for fmt in (SCHEMA_FORMAT, None):
                    server.script(REPLY)
                    await llm.chat(
                        model="gemini-2.5-flash",
                        messages=messages,
                        params={"temperature": 0.0},
                        response_format=fmt,
                    )
            finally:
                await llm.aclose()

        _run(go)
        wire = server.bodies()
    assert len(wire) == 2
    for body in wire:  # what goes on the wire (built by the SDK from ci-evals' body)
        check_gemini(body, with_model=False)
    for mutate in (
        lambda b: b.update(systemInstructions=b["systemInstruction"]),
        lambda b: b["contents"][0]["parts"][0].update(txt="x"),
        lambda b: b["generationConfig"].update(temperature="warm"),
        lambda b: b["generationConfig"].update(responseMimeTyp="application/json"),
    ):
        body = copy.deepcopy(built[0])
        mutate(body)
        with pytest.raises((AssertionError, ValidationError)):
            check_gemini(body, with_model=True)


def test_gemini_answers_parse_with_the_sdks_response_type():
    genai = pytest.importorskip("google.genai.types")
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    with FakeGemini() as server:
        answer = _post(
            server.url.rstrip("/") + "/v1beta/models/gemini-2.5-flash:generateContent", body
        )
        server.fault("500", first=1)
        status, error = _post_status(
            server.url.rstrip("/") + "/v1beta/models/gemini-2.5-flash:generateContent", body
        )
    genai.GenerateContentResponse.model_validate(answer)
    assert status == 500 and set(error["error"]) >= {"code", "message", "status"}
    with pytest.raises(ValidationError):
        genai.GenerateContentResponse.model_validate({**answer, "candidatez": []})
