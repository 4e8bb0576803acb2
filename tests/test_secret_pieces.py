"""F12: a secret split over lines, wrapped at 76 characters, base64-encoded or broken by ``\\n``
escapes never leaks in pieces: no 16-character run of it (or of its base64) in any output."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ci_evals._util import redact

KEY = "sk-piece-" + "Q7mZ2xV9kL4pR8tW1yB6nC3dF5gH0jK"  # 41 characters, registered through *_API_KEY

EMIT = r"""
import base64, json, os, sys, textwrap
key, mode = os.environ["PIECE_API_KEY"], sys.argv[1]
sys.stdin.read()
if mode == "two_lines":
    text = "token part one " + key[:20] + "\nand part two " + key[20:] + " end"
elif mode == "json76":  # a JSON encoder's text wrapped at 76 characters
    text = "\n".join(textwrap.wrap(json.dumps({"padding": "p" * 33, "key": key}), 76, break_on_hyphens=False))
elif mode == "base64":  # MIME-style base64 of a config holding the key, 76 characters a line
    blob = base64.b64encode(("Authorization: Bearer " + key + "\n").encode()).decode()
    text = "\n".join(blob[i:i + 76] for i in range(0, len(blob), 76))
elif mode == "escaped":  # the key broken by a literal \n escape inside a JSON string
    text = json.dumps({"log": key[:18] + "\n" + key[18:]})
else:
    text = "-".join(key[i:i + 17] for i in range(0, len(key), 17))
print(text, file=sys.stderr)
print(json.dumps({"output": text}))
sys.exit(int(sys.argv[2]))
"""


def pieces(secret: str, n: int = redact.PIECE) -> set[str]:
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


def _all_text(root: Path) -> dict[str, str]:
    return {
        p.name: p.read_text(encoding="utf-8", errors="replace")
        for p in (root / "out").iterdir()
        if p.is_file()
    }


@pytest.mark.parametrize("mode", ["two_lines", "json76", "base64", "escaped", "dashes"])
@pytest.mark.parametrize("fail", [0, 1])
def test_no_16_character_piece_of_a_secret_in_any_output(tmp_path, mode, fail):
    (tmp_path / "emit.py").write_text(EMIT, encoding="utf-8")
    (tmp_path / "dataset.jsonl").write_text(
        json.dumps({"id": 1, "input": "q", "ground_truth": "zzz"}) + "\n"
    )
    suite = {
        "name": "pieces",
        "dataset": "dataset.jsonl",
        "cache": False,
        "target": {"kind": "command", "command": [sys.executable, "emit.py", mode, str(fail)]},
        "graders": {"acc": {"kind": "tool", "function": "contains"}},
        "gate": {"op": "gte", "value": 0.5},
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(suite))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "LETTA_", "INPUT_", "GITHUB_"))
    }
    env["PIECE_API_KEY"] = KEY
    proc = subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", "suite.yaml", "-o", "out", "--dry-run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    texts = {"stdout": proc.stdout, "stderr": proc.stderr, **_all_text(tmp_path)}
    assert set(texts) >= {"results.jsonl", "summary.json", "summary.md", "junit.xml", "report.html"}
    forbidden = pieces(KEY).union(*(pieces(f) for f in redact.encoded_forms(KEY)))
    leaks = {(name, p) for name, text in texts.items() for p in forbidden if p in text}
    assert not leaks, sorted(leaks)[:5]
    row = json.loads(texts["results.jsonl"])
    assert ("***" in row["error"]["message"]) if fail else ("***" in json.dumps(row["trajectory"]))


def test_pieces_of_a_registered_secret_are_masked_and_prose_is_not():
    secret = "regd-" + "a1B2c3D4e5F6g7H8i9J0k1L2"
    redact.register(secret)
    wrapped = "x " + secret[:12] + "\n" + secret[12:] + " y"
    assert (
        redact.scrub(wrapped) == "x " + secret[:12] + "\n*** y"
    )  # 12 characters are below a piece
    assert redact.scrub("a " + secret[:16] + " b " + secret[-16:]) == "a *** b ***"
    assert redact.scrub("a " + secret[3:18] + " b") == "a " + secret[3:18] + " b"  # 15: kept
    assert (
        redact.scrub("nothing to see in ordinary prose, 1234567890 abcdefgh")
        == "nothing to see in ordinary prose, 1234567890 abcdefgh"
    )


def test_base64_forms_of_a_secret_are_secrets_too():
    secret = "regd-b64-" + "Zq8Wx7Ec6Rv5Tb4Yn3Um2Il1Ok0P"
    redact.register(secret)
    for prefix in ("", "a", "ab", "Authorization: Basic "):
        blob = base64.b64encode((prefix + secret).encode()).decode()
        scrubbed = redact.scrub(blob)
        assert "***" in scrubbed and not any(
            p in scrubbed for f in redact.encoded_forms(secret) for p in pieces(f)
        )
    wrapped = "\n".join(textwrap.wrap(base64.b64encode(secret.encode() * 3).decode(), 76))
    assert not any(
        p in redact.scrub(wrapped) for p in pieces(base64.b64encode(secret.encode()).decode()[4:-4])
    )


def test_a_key_as_a_vendor_shows_it_masked_is_masked_whole_and_prose_is_not():
    openai_401 = (
        "Incorrect API key provided: sk-proj-"
        + "*" * 27
        + "j1Aa. You can find your API key at https://x."
    )
    assert (
        redact.scrub(openai_401)
        == "Incorrect API key provided: ***. You can find your API key at https://x."
    )
    assert redact.scrub("key sk-ab********** and ********wxyz") == "key *** and ***"
    prose = "***bold*** ****** a rule, ***** five, x**y"
    assert redact.scrub(prose) == prose


@pytest.mark.parametrize(
    "text",
    [
        "a" * 200_000 + " ******",
        "*" * 200_000,
        "aaaaa*****" * 40_000,
        ("abc" + "*" * 7 + " ") * 20_000,
    ],
    ids=["word", "stars", "five", "many"],
)
def test_the_masked_key_shape_scans_in_linear_time(text):
    import time

    t0 = time.perf_counter()
    redact.scrub(text)
    assert time.perf_counter() - t0 < 1.0  # a backtracking pattern takes minutes on these


def test_a_401_that_shows_the_key_masked_leaves_no_end_of_it_in_any_output(sd, monkeypatch):
    from tests.fakes.openai_server import FakeOpenAI

    key = "sk-proj-" + "Zq9XwTc4Lm7Rb2Hn5Vk8Pd3Fs6Gj1Aa"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with FakeOpenAI() as server:  # OpenAI's words: the first 8 and the last 4 characters shown
        server.fault(
            "401",
            path=None,
            message=f"Incorrect API key provided: {key[:8]}{'*' * (len(key) - 12)}"
            f"{key[-4:]}. You can find your API key at https://platform.openai.com.",
        )
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        sd.write("dataset.jsonl", [{"id": i, "input": f"q{i}"} for i in range(3)])
        sd.suite(
            {
                "name": "k",
                "dataset": "dataset.jsonl",
                "target": {"kind": "model", "model": "gpt-4o-mini"},
                "graders": {
                    "q": {"kind": "rubric", "model": "gpt-4o-mini", "prompt": "Score {submission}"}
                },
                "gate": {"metric_key": "q", "op": "gte", "value": 0.5},
            }
        )
        assert sd.run() == 1
    texts = {
        p.name: p.read_text(encoding="utf-8") for p in (sd.root / "out").iterdir() if p.is_file()
    }
    assert "Incorrect API key provided: ***." in texts["summary.json"]
    leaks = {
        (name, piece)
        for name, text in texts.items()
        for piece in (key[-4:], key[8:12])
        if piece in text
    }
    assert not leaks, leaks


SHAPED = [  # (text, what scrub_with makes of it with no known secret): one case or more per pattern
    ("key sk-abcdEFGH1234 end", "key sk-*** end"),
    ("token ghp_abcdefgh12345678 and github_pat_11ABCDEFG0123", "token ghp_*** and github_pat_***"),
    ("Authorization: Bearer abc.def-123456", "Authorization: Bearer ***"),
    ("curl -H 'authorization: BASIC dXNlcjpwYXNz1'", "curl -H 'authorization: BASIC ***'"),
    ('{"X-Api-Key": "key-12345678"}', '{"X-Api-Key": "***"}'),
    ("api_key=abcd1234 and more", "api_key=*** and more"),
    ("PRIVATE-TOKEN: glpat1234abcd", "PRIVATE-TOKEN: ***"),
    ("https://user:s3cret@host/x", "https://user:***@host/x"),
    (
        "Incorrect API key provided: sk-proj-" + "*" * 27 + "j1Aa.",
        "Incorrect API key provided: ***.",
    ),
]


@pytest.mark.parametrize("text,expected", SHAPED)
def test_each_secret_shape_is_masked_and_its_trigger_is_in_the_text(text, expected):
    assert redact.scrub_with(text, []) == expected
    # Every pattern that matches the text has a trigger the text holds: the triggers (and their
    # one-character gates) only spare a pattern's search where it cannot match.
    low = text.lower()
    for pattern, _, triggers in redact._PATTERNS:
        if pattern.search(text):
            assert any(
                (t[0] in low and any(h in low for h in t[1])) if isinstance(t, tuple) else t in low
                for t in triggers
            ), pattern.pattern


def test_a_text_without_any_trigger_is_returned_unchanged():
    line = '{"sample_id":1,"input":"What is 1 + 1?","grades":{"exact":{"score":0.0,"rationale":"Exact match"}}}'
    assert redact.scrub_with(line, []) is line
