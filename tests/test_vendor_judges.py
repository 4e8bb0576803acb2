"""Anthropic and Gemini judges: each vendor's SDK over real HTTP against the local fakes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

import ci_evals.llm.client as llm_client
from ci_evals._util.errors import ConfigError
from ci_evals.config.specs import Context
from ci_evals.core.sample import Sample
from ci_evals.graders.base import build_grader
from ci_evals.graders.judge_prompt import JUDGE_SYSTEM_PROMPT, build_judge_prompt
from ci_evals.graders.rubric_modes import JUDGE_SCHEMA
from ci_evals.llm.providers import require
from tests.fakes.vendor_servers import (  # noqa: F401
    MESSAGES,
    FakeAnthropic,
    FakeGemini,
    anthropic_server,
    gemini_server,
)
from tests.test_rubric_grader import grade

ANT_KEY = "sk-ant-test-secret-0123456789"
GEM_KEY = "AIzaSyTestSecret0123456789"
CAPITAL = Sample(id=1, input="What is the capital of France?", ground_truth="Paris")
PARIS = "Paris."
REPLY = {"score": 0.75, "rationale": "mostly right"}


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(llm_client, "BACKOFF_BASE", 0.01)
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def anthropic_env(anthropic_server, monkeypatch):  # noqa: F811
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANT_KEY)
    return anthropic_server


@pytest.fixture
def gemini_env(gemini_server, monkeypatch):  # noqa: F811
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini_server.url)
    monkeypatch.setenv("GEMINI_API_KEY", GEM_KEY)
    return gemini_server


def make(raw: dict, tmp_path, *, cache: bool = False, pricing: dict | None = None):
    ctx = Context(
        tmp_path,
        tmp_path / "suite.yaml",
        cache_dir=tmp_path / "cache" if cache else None,
        pricing=pricing,
    )
    return build_grader("quality", {"kind": "model_judge", "prompt": "Is it right?", **raw}, ctx)


def judge(grader, sample: Sample = CAPITAL):
    return grade(grader, sample, PARIS)


def words(text: str) -> int:
    return len(text.split())


# --- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_judge_sends_letta_evals_request_and_scores(anthropic_env, tmp_path):
    from anthropic import transform_schema

    anthropic_env.script(REPLY)
    g = judge(make({"provider": "anthropic", "model": "claude-haiku-4-5"}, tmp_path))
    user = build_judge_prompt("Is it right?", CAPITAL, PARIS)
    assert anthropic_env.bodies(MESSAGES) == [
        {
            "model": "claude-haiku-4-5",
            "max_tokens": 4096,
            "messages": [{"role": "user", "content": user}],
            "system": [
                {
                    "type": "text",
                    "text": JUDGE_SYSTEM_PROMPT,
                    "cache_control": {"type": "ephemeral"},
                }
            ],
            "output_config": {
                "format": {"type": "json_schema", "schema": transform_schema(JUDGE_SCHEMA)}
            },
        }
    ]
    headers = anthropic_env.requests[0].headers
    assert headers["authorization"] == f"Bearer {ANT_KEY}"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", headers["anthropic-version"])
    prompt = words(JUDGE_SYSTEM_PROMPT) + words(user)
    assert (g.score, g.rationale, g.error) == (0.75, "mostly right", None)
    assert g.metadata == {
        "model": "claude-haiku-4-5",
        "usage": {"prompt_tokens": prompt, "completion_tokens": 5},
        "cache_hits": 0,
        "retries": 0,
        # genai-prices' claude-haiku-4-5: $1 in, $5 out per million tokens
        "cost_usd": pytest.approx((prompt * 1.0 + 5 * 5.0) / 1e6, rel=1e-12),
    }


def test_an_anthropic_judges_temperature_is_not_sent_and_the_user_is_told(
    anthropic_env, tmp_path, capsys
):
    # anthropic>=2.0 speaks API version 2026-10-21, which answers any temperature, top_p or top_k
    # with a 400 (the fake does too): the judge sends none, and a temperature the suite asked for
    # is named once at load, and by `validate`.
    import anthropic

    anthropic_env.script(REPLY)
    grader = make(
        {"provider": "anthropic", "model": "claude-haiku-4-5", "temperature": 0.7}, tmp_path
    )
    assert capsys.readouterr().err == (
        "warning: graders.quality.temperature: not sent: Anthropic's Messages API version "
        "2026-10-21, which anthropic>=2.0 speaks, takes no temperature, top_p or top_k "
        "(a 400 even at the default)\n"
    )
    assert grader.describe().endswith("; temperature not sent")
    g = judge(grader)
    assert (g.score, g.error) == (0.75, None)
    (body,) = anthropic_env.bodies(MESSAGES)
    assert {"temperature", "top_p", "top_k"}.isdisjoint(body)
    version = anthropic_env.requests[0].headers["anthropic-version"]
    assert version == anthropic._constants.ANTHROPIC_API_VERSION >= "2026-10-21"
    # The default temperature (not written in the suite) goes unmentioned.
    make({"provider": "anthropic", "model": "claude-haiku-4-5"}, tmp_path)
    assert capsys.readouterr().err == ""


def test_the_missing_sdk_line_names_pyprojects_own_requirement():
    import tomllib
    from pathlib import Path

    from ci_evals.llm import providers

    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert {p: [req] for p, (_, req) in providers._EXTRAS.items()} == {
        p: extras[p] for p in ("anthropic", "google")
    }


def test_the_fake_anthropic_answers_a_temperature_as_the_api_does(anthropic_env):
    body = {"model": "m", "max_tokens": 8, "temperature": 1.0, "messages": []}
    req = urllib.request.Request(
        anthropic_env.url + MESSAGES,
        data=json.dumps(body).encode(),
        headers={"x-api-key": ANT_KEY, "anthropic-version": "2026-10-21"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(req, timeout=5)
    assert caught.value.code == 400
    assert json.loads(caught.value.read())["error"] == {
        "type": "invalid_request_error",
        "message": "temperature: Extra inputs are not permitted",
    }


def test_anthropic_retries_429_529_and_500_then_succeeds(anthropic_env, tmp_path):
    anthropic_env.fault("429", first=1, retry_after="0")
    anthropic_env.fault("overloaded", first=1)
    anthropic_env.fault("500", first=1)
    anthropic_env.script(REPLY)
    g = judge(make({"provider": "anthropic"}, tmp_path))
    # 429 and 529 are waits (throttled), the 500 a retry
    assert (
        g.score,
        g.error,
        g.metadata["retries"],
        g.metadata["throttled"],
        anthropic_env.count(),
    ) == (0.75, None, 1, 2, 4)


def test_anthropic_out_of_retries_is_an_error_grade_with_the_vendor_message(
    anthropic_env, tmp_path
):
    anthropic_env.fault("500", message="Internal")
    g = judge(make({"provider": "anthropic", "max_retries": 2}, tmp_path))
    assert g.error == f"{anthropic_env.url}/v1/messages: HTTP 500: Internal (after 2 retries)"
    assert (g.score, g.metadata["retries"], anthropic_env.count()) == (0.0, 2, 3)


def test_anthropic_overloaded_for_longer_than_max_wait_is_an_error_saying_so(anthropic_env, sd):
    anthropic_env.fault("overloaded", message="Overloaded")
    sd.write("dataset.jsonl", [{"input": "q", "ground_truth": "a"}])
    sd.write("outputs.jsonl", [{"id": 0, "output": "a"}])
    sd.suite(
        {
            "name": "t",
            "dataset": "dataset.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {
                "quality": {
                    "kind": "model_judge",
                    "provider": "anthropic",
                    "model": "judge-1",
                    "prompt": "ok?",
                    "max_retries": 0,
                }
            },
        }
    )
    t0 = time.monotonic()
    assert sd.run("--max-wait", "1") == 1
    # it waits out max_wait (1 s) and no longer: well under the default 600 s even on CI's busiest
    # step (the range tests share two cores with the whole suite: 9.4 s there once, with imports)
    elapsed = time.monotonic() - t0
    assert 0.9 < elapsed < 30
    (rec,) = sd.results()
    error = rec["grades"]["quality"]["error"]
    # the wait it states is measured: "after 2 s" once on CI's loaded machine (1.5 s or more)
    said = re.fullmatch(
        rf"{re.escape(anthropic_env.url)}/v1/messages: HTTP 529: Overloaded; rate limited: still "
        r"throttled after (\d+) s \(max_wait 1 s\)",
        error,
    )
    assert said and 1 <= int(said.group(1)) <= elapsed + 0.5, error
    assert sd.summary()["endpoints"][0]["rejected"] == anthropic_env.count() >= 2


def test_anthropic_400_is_not_retried_and_the_key_never_shows(anthropic_env, tmp_path):
    anthropic_env.fault("400", message=f"bad request for key {ANT_KEY}")
    g = judge(make({"provider": "anthropic"}, tmp_path))
    assert g.error == f"{anthropic_env.url}/v1/messages: HTTP 400: bad request for key ***"
    assert anthropic_env.count() == 1 and ANT_KEY not in json.dumps(g.model_dump())


def test_anthropic_malformed_body_is_retried(anthropic_env, tmp_path):
    anthropic_env.fault("malformed", first=1)
    anthropic_env.script(REPLY)
    g = judge(make({"provider": "anthropic"}, tmp_path))
    assert (g.score, g.metadata["retries"]) == (0.75, 1)


def test_anthropic_spec_base_url_and_api_key_env_win(anthropic_server, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("MY_CLAUDE_KEY", "sk-ant-own-key-999999")
    anthropic_server.script(REPLY)
    g = judge(
        make(
            {
                "provider": "anthropic",
                "base_url": anthropic_server.url,
                "api_key_env": "MY_CLAUDE_KEY",
            },
            tmp_path,
        )
    )
    assert (
        g.score == 0.75
        and anthropic_server.requests[0].headers["authorization"] == "Bearer sk-ant-own-key-999999"
    )


def test_anthropic_without_key_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        judge(make({"provider": "anthropic"}, tmp_path))
    assert str(info.value) == (
        "graders.quality: ANTHROPIC_API_KEY is not set; set it for provider 'anthropic', "
        "or point base_url at a compatible server"
    )


def test_anthropic_cache_and_cost_as_for_openai(anthropic_env, tmp_path):
    pricing = {"claude-haiku-4-5": {"input_per_mtok": 1.0, "output_per_mtok": 5.0}}
    anthropic_env.script(
        {
            "text": json.dumps(REPLY),
            "usage": {
                "input_tokens": 100,
                "output_tokens": 20,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 50,
            },
        }
    )
    raw = {"provider": "anthropic", "model": "claude-haiku-4-5"}
    first = judge(make(raw, tmp_path, cache=True, pricing=pricing))
    second = judge(make(raw, tmp_path, cache=True, pricing=pricing))
    assert first.metadata["usage"] == {"prompt_tokens": 150, "completion_tokens": 20}
    assert first.metadata["cost_usd"] == pytest.approx((150 * 1.0 + 20 * 5.0) / 1e6)
    assert (second.score, second.metadata["cache_hits"], second.metadata["usage"]) == (
        0.75,
        1,
        {"prompt_tokens": 0, "completion_tokens": 0},
    )
    assert anthropic_env.count() == 1


# --- Gemini ------------------------------------------------------------------------------------


def test_gemini_judge_sends_letta_evals_request_and_scores(gemini_env, tmp_path):
    gemini_env.script(REPLY)
    g = judge(make({"provider": "google", "model": "gemini-2.5-flash"}, tmp_path))
    user = build_judge_prompt("Is it right?", CAPITAL, PARIS)
    [req] = gemini_env.requests
    assert req.path == "/v1/models/gemini-2.5-flash:generateContent"
    assert req.headers["x-goog-api-key"] == GEM_KEY
    config = req.body["generationConfig"]
    assert req.body["contents"] == [{"parts": [{"text": user}], "role": "user"}]
    assert req.body["systemInstruction"]["parts"] == [{"text": JUDGE_SYSTEM_PROMPT}]
    assert (config["temperature"], config["responseMimeType"]) == (0.0, "application/json")
    assert config["responseSchema"]["required"] == ["score", "rationale"]
    assert config["responseSchema"]["properties"]["score"]["type"] == "NUMBER"
    prompt = words(JUDGE_SYSTEM_PROMPT) + words(user)
    assert (g.score, g.rationale, g.error) == (0.75, "mostly right", None)
    assert g.metadata["usage"] == {"prompt_tokens": prompt, "completion_tokens": 5}


def test_gemini_google_api_key_is_the_fallback(gemini_server, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini_server.url)
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaFallbackKey0000")
    gemini_server.script(REPLY)
    assert judge(make({"provider": "google"}, tmp_path)).score == 0.75
    assert gemini_server.requests[0].headers["x-goog-api-key"] == "AIzaFallbackKey0000"


def test_gemini_retries_429_with_retry_info_and_503(gemini_env, tmp_path):
    gemini_env.fault("429", first=1)
    gemini_env.fault("503", first=1)
    gemini_env.script(REPLY)
    g = judge(make({"provider": "google"}, tmp_path))
    assert (g.score, g.metadata["retries"], g.metadata["throttled"], gemini_env.count()) == (
        0.75,
        0,
        2,
        3,
    )


def test_gemini_400_is_final_with_the_vendor_message(gemini_env, tmp_path):
    gemini_env.fault("400", message="API key not valid. Please pass a valid API key.")
    g = judge(make({"provider": "google", "model": "gemini-x"}, tmp_path))
    assert g.error == (
        f"{gemini_env.url.rstrip('/')}/v1/models/gemini-x:generateContent: "
        "HTTP 400: API key not valid. Please pass a valid API key."
    )
    assert gemini_env.count() == 1


def test_gemini_connection_refused_before_any_answer_is_an_error_at_once(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMINI_API_KEY", GEM_KEY)
    g = judge(
        make(
            {
                "provider": "google",
                "model": "m",
                "base_url": "http://127.0.0.1:9/",
                "max_retries": 1,
            },
            tmp_path,
        )
    )
    # before any answer a refused connection is not retried (the breaker counts it instead)
    assert (
        g.error
        == "http://127.0.0.1:9/v1/models/m:generateContent: nothing listens on 127.0.0.1:9 (connection refused)"
    )
    assert g.metadata["retries"] == 0


def test_gemini_without_key_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        judge(make({"provider": "google"}, tmp_path))
    assert str(info.value) == (
        "graders.quality: GEMINI_API_KEY or GOOGLE_API_KEY is not set; set it for provider "
        "'google', or point base_url at a compatible server"
    )


# --- missing extras -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "line"),
    [
        (
            "anthropic",
            "provider 'anthropic' needs the anthropic SDK: pip install 'anthropic>=2.0' (the ci-evals[anthropic] extra)",
        ),
        (
            "google",
            "provider 'google' needs the google.genai SDK: pip install 'google-genai>=3.0' (the ci-evals[google] extra)",
        ),
    ],
)
def test_missing_extra_is_one_line_naming_the_pip_command(provider, line, monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError) as info:
        require(provider, "graders.quality.provider")
    assert str(info.value) == f"graders.quality.provider: {line}"


def test_validate_without_the_anthropic_sdk_exits_2_with_one_line(sd):
    sd.write("dataset.jsonl", [{"input": "q", "ground_truth": "a"}])
    sd.write("outputs.jsonl", [{"id": 0, "output": "a"}])
    sd.suite(
        {
            "name": "t",
            "dataset": "dataset.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {
                "quality": {"kind": "model_judge", "prompt": "ok?", "provider": "anthropic"}
            },
        }
    )
    code = (
        "import sys; sys.modules['anthropic'] = None; from ci_evals.cli.app import main; "
        f"sys.exit(main(['validate', {str(sd.root / 'suite.yaml')!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    line = (sd.root / "suite.yaml").read_text().splitlines().index("    provider: anthropic") + 1
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: {sd.root / 'suite.yaml'}:{line}: graders.quality.provider: provider 'anthropic' "
        "needs the anthropic SDK: pip install 'anthropic>=2.0' (the ci-evals[anthropic] extra)\n"
    )


def test_anthropic_timeout_is_retried_then_an_error(anthropic_env, tmp_path):
    anthropic_env.fault("hang", hang_s=4)
    g = judge(make({"provider": "anthropic", "timeout": 1, "max_retries": 1}, tmp_path))
    assert g.error == f"{anthropic_env.url}/v1/messages: timed out after 1 s (after 1 retries)"
    # the retry was sent. The timeout is 1 s, not 0.3 s: under CI's load a 0.3 s attempt could
    # time out before its request was written (the server then counted 1, even after 5 s). The
    # server's thread may record it after the client gave up, so it is waited for (a client that
    # never sent it leaves the count at 1)
    deadline = time.monotonic() + 5
    while anthropic_env.count() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert anthropic_env.count() == 2


@pytest.mark.parametrize(
    ("details", "seconds"),
    [
        (
            {
                "error": {
                    "details": [
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2.5s"}
                    ]
                }
            },
            2.5,
        ),
        ({"error": {"details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure"}]}}, None),
        (
            {
                "error": {
                    "details": [
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "soon"}
                    ]
                }
            },
            None,
        ),
        ("not json", None),
    ],
)
def test_gemini_retry_info_delay(details, seconds):
    from ci_evals.llm.providers import _retry_delay

    assert _retry_delay(details) == seconds


def test_gemini_waits_what_retry_info_asks(gemini_env, tmp_path, monkeypatch):
    from ci_evals.llm.scheduler import Endpoint

    pauses = []
    real = Endpoint.throttled

    def throttled(self, ticket, asked, headers=None):
        pauses.append(asked)
        return real(self, ticket, asked, headers)

    monkeypatch.setattr(Endpoint, "throttled", throttled)
    gemini_env.fault("429", first=1)  # the fake's RetryInfo says 0.05s
    gemini_env.script(REPLY)
    t0 = time.monotonic()
    assert judge(make({"provider": "google"}, tmp_path)).score == 0.75
    assert pauses == [0.05] and time.monotonic() - t0 >= 0.05


# --- whole runs: the summary counts vendor tokens, cost and retries as for OpenAI ---------------


@pytest.mark.parametrize("provider", ["anthropic", "google"])
def test_a_run_with_a_vendor_judge_reports_tokens_cost_and_retries(
    provider, sd, request, monkeypatch
):
    server = request.getfixturevalue("anthropic_env" if provider == "anthropic" else "gemini_env")
    server.script(
        {
            "text": json.dumps(REPLY),
            "usage": (
                {"input_tokens": 40, "output_tokens": 10}
                if provider == "anthropic"
                else {"promptTokenCount": 40, "candidatesTokenCount": 10, "totalTokenCount": 50}
            ),
        }
    )
    server.fault("429", first=1, retry_after="0")
    sd.write("dataset.jsonl", [{"input": "q", "ground_truth": "a"}])
    sd.write("outputs.jsonl", [{"id": 0, "output": "a"}])
    sd.suite(
        {
            "name": "t",
            "dataset": "dataset.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {
                "quality": {
                    "kind": "model_judge",
                    "provider": provider,
                    "model": "judge-1",
                    "prompt": "ok?",
                }
            },
            "gate": {"metric_key": "quality", "op": "gte", "value": 0.7},
            "pricing": {"judge-1": {"input_per_mtok": 2.0, "output_per_mtok": 10.0}},
        }
    )
    assert sd.run() == 0
    s = sd.summary()
    assert s["metrics"]["quality"]["mean"] == 0.75
    assert s["usage"]["graders"]["quality"] == {"prompt_tokens": 40, "completion_tokens": 10}
    assert s["usage"]["cost_usd"] == round((40 * 2.0 + 10 * 10.0) / 1e6, 6)
    assert (s["retries"], server.count(), s["endpoints"][0]["rejected"]) == (0, 2, 1)


def test_verbatim_anthropic_has_no_system_block_and_uses_the_schema(anthropic_env, tmp_path):
    anthropic_env.script(REPLY)
    judge(
        make(
            {
                "provider": "anthropic",
                "prompt": "Rate {submission} for {input}",
                "rubric_mode": "verbatim",
            },
            tmp_path,
        )
    )
    [body] = anthropic_env.bodies(MESSAGES)
    assert "system" not in body and body["output_config"]["format"]["type"] == "json_schema"
    assert body["messages"] == [
        {"role": "user", "content": "Rate Paris. for What is the capital of France?"}
    ]


def test_verbatim_gemini_sends_the_system_prompt_as_system_instruction(gemini_env, tmp_path):
    gemini_env.script(REPLY)
    judge(
        make(
            {
                "provider": "google",
                "prompt": "Rate {submission}",
                "rubric_mode": "verbatim",
                "system_prompt": "You grade.",
            },
            tmp_path,
        )
    )
    [req] = gemini_env.requests
    assert req.body["systemInstruction"]["parts"] == [{"text": "You grade."}]
    assert req.body["contents"] == [{"parts": [{"text": "Rate Paris."}], "role": "user"}]


@pytest.mark.parametrize(
    "usage",
    [
        "lots",
        [1],
        {"input_tokens": "x", "output_tokens": float("nan")},
        {"input_tokens": 10**301, "output_tokens": -7},
    ],
)
def test_an_anthropic_answer_with_a_malformed_usage_is_graded_and_counts_bounded_tokens(
    usage, sd, anthropic_env
):
    """Issue 37 G1 on the Anthropic path: the answer is used; its token counts are read bounded."""
    anthropic_env.script({"text": json.dumps(REPLY), "usage": usage})
    sd.write("dataset.jsonl", [{"input": "q", "ground_truth": "a"}])
    sd.write("outputs.jsonl", [{"id": 0, "output": "a"}])
    sd.suite(
        {
            "name": "t",
            "dataset": "dataset.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {
                "quality": {
                    "kind": "model_judge",
                    "provider": "anthropic",
                    "model": "judge-1",
                    "prompt": "ok?",
                }
            },
        }
    )
    assert sd.run() == 0
    s = sd.summary()
    big = usage.get("input_tokens") == 10**301 if isinstance(usage, dict) else False
    assert (s["metrics"]["quality"]["mean"], s["errors"]["total"], anthropic_env.count()) == (
        0.75,
        0,
        1,
    )
    assert s["usage"]["graders"]["quality"] == {
        "prompt_tokens": 1_000_000_000 if big else 0,
        "completion_tokens": 0,
    }
