"""The price list's answers kept for the day (ci_evals.llm.price_memo): a later run prices the same
models without importing genai-prices, to the same figure; a damaged, foreign, stale or oversized
memo, or a folder others may write to, is never believed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from ci_evals.llm import price_memo, prices
from ci_evals.llm.price_memo import MISS, Memo

MILLION = {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000}
TIERED = "gemini-2.5-pro"  # priced by prompt size: over 200k prompt tokens costs more
SCRIPT = """
import json, sys
from ci_evals.llm import prices
prices.warm(); prices.warmed()
out = {"after_warm": "genai_prices" in sys.modules}
out["costs"] = [prices.price(m, {"prompt_tokens": 1234, "completion_tokens": 567}, None, u)
                for m, u in json.loads(sys.argv[1])]
out["imported"] = "genai_prices" in sys.modules
print(json.dumps(out))
"""


def run(cache: Path, pairs: list[tuple[str, str | None]]) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(pairs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout)


def listed(model: str, prompt: int, completion: int, **where: str) -> float:
    usage = Usage(input_tokens=prompt, output_tokens=completion)
    return float(calc_price(usage, model, **where).total_price)


def memo_file(cache: Path) -> Path:
    (path,) = (cache / "ci-evals" / "prices").glob("*.json")
    return path


def test_a_second_run_prices_the_same_models_without_the_list(tmp_path):
    pairs = [
        ("gpt-4o-mini", None),
        ("claude-haiku-4-5", "https://api.anthropic.com"),
        ("acme-chat-1", "http://127.0.0.1:9/v1"),
    ]
    first = run(tmp_path, pairs)
    want = [
        listed("gpt-4o-mini", 1234, 567),
        listed("claude-haiku-4-5", 1234, 567, provider_id="anthropic"),
        None,
    ]
    assert first == {"after_warm": True, "costs": want, "imported": True}
    path = memo_file(tmp_path)
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    assert json.loads(path.read_text()) == {
        "gpt-4o-mini\0": ["0.15", "0.6"],
        "claude-haiku-4-5\0https://api.anthropic.com": ["1", "5"],
        "acme-chat-1\0loopback": None,
    }
    assert run(tmp_path, pairs) == {"after_warm": False, "costs": want, "imported": False}
    # A local server on another port each run is the same server to the price list.
    moved = [("acme-chat-1", "http://localhost:41234/v1"), ("gpt-4o-mini", "http://[::1]:8/")]
    assert run(tmp_path, moved) == {
        "after_warm": False,
        "costs": [None, want[0]],
        "imported": True,  # (gpt-4o-mini at a loopback URL was not asked before)
    }
    # A model the memo has not seen imports the list for it, and joins the memo.
    third = run(tmp_path, [("gpt-4o-mini", None), ("gpt-4o", None)])
    assert third == {
        "after_warm": False,
        "costs": [want[0], listed("gpt-4o", 1234, 567)],
        "imported": True,
    }
    assert json.loads(path.read_text())["gpt-4o\0"] == ["2.5", "10"]


LOOPBACK = [
    "http://127.0.0.1:8080/v1",
    "https://127.0.0.1/v1",
    "http://localhost:11434/v1",
    "https://localhost/openai/v1",
    "http://[::1]:9000",
    "http://127.1.2.3:80/api/v1",
]


def test_no_provider_of_the_installed_list_is_at_a_loopback_address():
    # What keying every loopback URL alike rests on: the list finds no provider at any of them,
    # so a model there is priced as the list prices it at any other loopback URL.
    import re

    from genai_prices import data_snapshot

    patterns = [p.api_pattern for p in data_snapshot.get_snapshot().providers]
    assert len(patterns) > 20
    assert [(p, u) for p in patterns for u in LOOPBACK if re.match(p, u)] == []
    keys = {price_memo._key("gpt-4o-mini", u) for u in LOOPBACK}
    assert keys == {"gpt-4o-mini\0loopback"}
    assert price_memo._key("gpt-4o-mini", "https://api.openai.com/v1") == (
        "gpt-4o-mini\0https://api.openai.com/v1"
    )
    assert price_memo._key("m", "http://10.0.0.5:8000/v1") == "m\0http://10.0.0.5:8000/v1"
    assert price_memo._key("m", "http://[bad") == "m\0http://[bad"


def test_a_tiered_price_is_never_kept_and_always_computed_by_the_list(tmp_path):
    big = {"prompt_tokens": 300_000, "completion_tokens": 10}
    first = run(tmp_path, [(TIERED, None)])
    assert first["costs"] == [listed(TIERED, 1234, 567)]
    assert not list((tmp_path / "ci-evals" / "prices").glob("*.json"))
    memo = Memo(tmp_path)
    prices_memo, prices._memo = prices._memo, memo
    try:
        assert prices.price(TIERED, big) == listed(TIERED, 300_000, 10)
    finally:
        prices._memo = prices_memo
    assert memo.get(TIERED, None) is MISS and memo.path is not None and not memo.path.exists()


@pytest.mark.parametrize(
    "entry",
    [["-1", "2"], ["NaN", "1"], ["1e999999", "1"], ["Infinity", "1"], [1, 2], ["a", "b"], "0.1"],
)
def test_a_damaged_entry_is_a_miss_and_the_list_prices_the_call_again(tmp_path, entry):
    memo = Memo(tmp_path)
    assert memo.path is not None
    memo.path.write_text(json.dumps({"gpt-4o-mini\0": entry}))
    assert memo.get("gpt-4o-mini", None) is MISS
    fresh = Memo(tmp_path)
    prices_memo, prices._memo = prices._memo, fresh
    try:
        assert prices.price("gpt-4o-mini", MILLION) == 0.75
    finally:
        prices._memo = prices_memo
    assert json.loads(memo.path.read_text()) == {"gpt-4o-mini\0": ["0.15", "0.6"]}


@pytest.mark.parametrize(
    "content", [b"not json", b"[1, 2]", b"{" * 100_000, b" " * (1 << 20) + b"{}"]
)
def test_an_unreadable_or_oversized_file_is_an_empty_memo(tmp_path, content):
    memo = Memo(tmp_path)
    assert memo.path is not None
    memo.path.write_bytes(content)
    assert memo.load() is False and memo.get("gpt-4o-mini", None) is MISS


def test_a_memo_is_for_its_day_and_the_next_days_write_removes_it(tmp_path):
    yesterday = Memo(tmp_path, today="2026-11-27")
    yesterday.put("gpt-4o-mini", None, (Decimal("0.15"), Decimal("0.6")))
    assert Memo(tmp_path, today="2026-11-27").get("gpt-4o-mini", None) == (
        Decimal("0.15"),
        Decimal("0.6"),
    )
    today = Memo(tmp_path, today="2026-11-28")
    assert today.get("gpt-4o-mini", None) is MISS
    today.put("gpt-4o-mini", None, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == [today.path.name]
    assert today.path.name.endswith("-2026-11-28.json")


def test_the_memo_names_the_installed_list_by_its_data_file(tmp_path, monkeypatch):
    a = Memo(tmp_path, today="2026-11-28")
    monkeypatch.setattr(price_memo, "_fingerprint", lambda: "another-install")
    b = Memo(tmp_path, today="2026-11-28")
    assert a.path != b.path and b.path == tmp_path / "another-install-2026-11-28.json"
    monkeypatch.setattr(price_memo, "_fingerprint", lambda: None)  # genai-prices not installed
    none = Memo(tmp_path)
    none.put("gpt-4o-mini", None, None)
    assert none.path is None and not list(tmp_path.iterdir())


def test_a_folder_others_may_write_to_is_not_used(tmp_path):
    folder = tmp_path / "ci-evals" / "prices"
    folder.mkdir(parents=True)
    forged = Memo(folder)
    assert forged.path is not None
    forged.path.write_text(json.dumps({"gpt-4o-mini\0": ["0", "0"]}))  # a free model, forged
    folder.chmod(0o777)
    out = run(tmp_path, [("gpt-4o-mini", None)])
    assert out == {
        "after_warm": True,
        "costs": [listed("gpt-4o-mini", 1234, 567)],
        "imported": True,
    }
    assert json.loads(forged.path.read_text()) == {"gpt-4o-mini\0": ["0", "0"]}  # untouched
