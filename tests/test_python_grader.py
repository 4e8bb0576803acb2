"""python grader: the seed's examples and exercise, limits, isolation, load-time errors."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from ci_evals._util.errors import ConfigError
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Message, ToolCall, Trajectory
from tests.test_string_check import grade_all, make, run_grader


def py(source: str, **options) -> dict:
    return {"type": "python", "name": "p", "source": source, **options}


def grade_many(raw: dict, submissions: list[str], **row) -> list:
    cases = [(Sample(id=i, input="q", extra_vars=row), s, None) for i, s in enumerate(submissions)]
    return asyncio.run(grade_all(make(raw), cases))


# --- the seed's examples, verbatim -----------------------------------------------------------

WORD_COUNT = """
def grade(sample, item) -> float:
    output = sample.get("output_text", "")
    word_count = len(output.split())
    max_words = item.get("max_words", 100)

    if word_count <= max_words:
        return 1.0
    else:
        # Partial credit for slightly over
        overage = word_count - max_words
        return max(0.0, 1.0 - (overage / max_words))
"""

JSON_FORMAT = """
import json

def grade(sample, item) -> float:
    output = sample.get("output_text", "")

    try:
        data = json.loads(output)
    except json.JSONDecodeError:
        return 0.0  # Not valid JSON

    # Check required fields
    required = item.get("required_fields", [])
    missing = [f for f in required if f not in data]

    if not missing:
        return 1.0
    else:
        return 1.0 - (len(missing) / len(required))
"""

FUZZY = """
from rapidfuzz import fuzz, utils

def grade(sample, item) -> float:
    output_text = sample["output_text"]
    reference_answer = item["reference_answer"]

    # Returns similarity ratio 0-100, convert to 0-1
    return fuzz.WRatio(
        output_text,
        reference_answer,
        processor=utils.default_process
    ) / 100.0
"""


def test_seed_syntax_example_returns_one():
    g = run_grader(
        {
            "type": "python",
            "source": "def grade(sample, item) -> float:\n    return 1.0",
            "image_tag": "2025-05-08",
        },
        "anything",
    )
    assert (g.score, g.error, g.rationale) == (1.0, None, "grade() returned 1")


def test_seed_validate_example_without_annotation():
    assert (
        run_grader(
            {"type": "python", "source": "def grade(sample, item):\n    return 1.0"}, "x"
        ).score
        == 1.0
    )


def test_seed_word_count():
    raw = {"type": "python", "source": WORD_COUNT, "image_tag": "2025-05-08"}
    assert run_grader(raw, "one two three", max_words=3).score == 1.0
    assert run_grader(raw, "one two three four", max_words=2).score == 0.0
    assert run_grader(raw, "a b c d e", max_words=4).score == 0.75
    assert run_grader(raw, " ".join(["w"] * 100)).score == 1.0  # default max_words 100
    assert run_grader(raw, " ".join(["w"] * 110)).score == 0.9


def test_seed_json_format_validation():
    raw = py(JSON_FORMAT)
    fields = ["name", "email", "phone", "city"]
    assert run_grader(raw, "not json", required_fields=fields).score == 0.0
    assert (
        run_grader(
            raw, '{"name": 1, "email": 2, "phone": 3, "city": 4}', required_fields=fields
        ).score
        == 1.0
    )
    assert run_grader(raw, '{"name": 1}', required_fields=fields).score == 0.25


def test_seed_fuzzy_match_with_rapidfuzz():
    g = run_grader(
        py(FUZZY),
        "The capital of France is Paris.",
        reference_answer="Paris is the capital of France.",
    )
    assert g.score == 0.95


# --- the seed's hands-on exercise ------------------------------------------------------------

GREETING = """
def grade(sample, item) -> float:
    output = sample.get("output_text", "").lower()
    if output.startswith("hello") or output.startswith("hi"):
        return 1.0
    return 0.0
"""
WORD_RANGE = """
def grade(sample, item) -> float:
    output = sample.get("output_text", "")
    words = len(output.split())

    if 50 <= words <= 200:
        return 1.0
    elif 30 <= words < 50 or 200 < words <= 250:
        return 0.5  # Partial credit
    else:
        return 0.0
"""
SIGNATURE = """
def grade(sample, item) -> float:
    output = sample.get("output_text", "")
    expected_name = item.get("sender_name", "")

    # Check last 50 chars for signature patterns
    ending = output[-100:].lower()

    patterns = ["regards,", "sincerely,", "best,", "thanks,"]
    has_closing = any(p in ending for p in patterns)
    has_name = expected_name.lower() in ending

    if has_closing and has_name:
        return 1.0
    elif has_closing or has_name:
        return 0.5
    return 0.0
"""
EXERCISE = {
    "greeting": {"type": "python", "source": GREETING, "name": "Has greeting"},
    "word_count": {"type": "python", "source": WORD_RANGE, "name": "Word count"},
    "signature": {"type": "python", "source": SIGNATURE, "name": "Has signature"},
}


def email(greeting: str, words: int, closing: str) -> str:
    return f"{greeting} " + " ".join(["word"] * (words - 1)) + f"\n\n{closing}"


@pytest.mark.parametrize(
    "text,expected",
    [
        (
            email("Hello Sam,", 60, "Best regards,\nAlex"),
            {"greeting": 1.0, "word_count": 1.0, "signature": 1.0},
        ),
        (
            email("Hi there,", 40, "Thanks,\nJo"),
            {"greeting": 1.0, "word_count": 0.5, "signature": 0.5},
        ),
        (email("Dear Sam,", 10, "Alex"), {"greeting": 0.0, "word_count": 0.0, "signature": 0.5}),
        (email("Yo,", 220, "Cheers"), {"greeting": 0.0, "word_count": 0.5, "signature": 0.0}),
        ("hi", {"greeting": 1.0, "word_count": 0.0, "signature": 0.0}),
    ],
)
def test_seed_exercise(text, expected):
    got = {k: run_grader(raw, text, sender_name="Alex").score for k, raw in EXERCISE.items()}
    assert got == expected


# --- what grade() sees ------------------------------------------------------------------------


def test_sample_and_item_shapes():
    src = "import json\ndef grade(sample, item):\n    print(json.dumps([sample, item], sort_keys=True))\n    return 1"
    traj = Trajectory(
        turns=[
            [
                Message(
                    role="assistant",
                    content='{"a": 1}',
                    tool_calls=[ToolCall(id="c1", name="lookup", arguments='{"q": "x"}')],
                )
            ]
        ]
    )
    g = run_grader(py(src), '{"a": 1}', traj, id="s1", ground_truth="gt", topic="t")
    sample, item = json.loads(g.metadata["output"])
    tools = [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    ]
    assert sample == {
        "output_text": '{"a": 1}',
        "output_json": {"a": 1},
        "output_tools": tools,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": '{"a": 1}', "tool_calls": tools},
            }
        ],
    }
    assert item == {
        "id": "s1",
        "input": "q",
        "ground_truth": "gt",
        "metadata": {},
        "tags": [],
        "topic": "t",
    }


def test_output_json_is_none_when_not_json():
    g = run_grader(
        py("def grade(sample, item):\n    return 1.0 if sample['output_json'] is None else 0.0"),
        "plain",
    )
    assert g.score == 1.0


# --- results that are errors, and values that are not -----------------------------------------


@pytest.mark.parametrize(
    "body,error",
    [
        ("raise ValueError('boom')", "python grader: ValueError: boom (line 2)"),
        ("return 'high'", "python grader: grade() returned str, expected a number"),
        ("return None", "python grader: grade() returned NoneType, expected a number"),
        ("return float('nan')", "python grader: grade() returned nan, expected a finite number"),
        ("return float('inf')", "python grader: grade() returned inf, expected a finite number"),
        (
            "return 10 ** 400",
            "python grader: grade() returned an invalid number: int too large to convert to float",
        ),
        ("return item['missing']", "python grader: KeyError: 'missing' (line 2)"),
        ("import sys; sys.exit(3)", "python grader: SystemExit: 3 (line 2)"),
    ],
)
def test_error_results(body, error):
    g = run_grader(py(f"def grade(sample, item):\n    {body}"), "x")
    assert (g.score, g.error, g.rationale) == (0.0, error, error)


def test_traceback_shows_the_users_line():
    g = run_grader(py("def grade(sample, item):\n    return 1 / 0"), "x")
    assert g.error == "python grader: ZeroDivisionError: division by zero (line 2)"
    assert g.metadata["traceback"].startswith(
        'Traceback (most recent call last):\n  File "<python grader g>", line 2, in grade\n    return 1 / 0\n'
    )


@pytest.mark.parametrize(
    "body,score",
    [
        ("return True", 1.0),
        ("return 0", 0.0),
        ("return 1.5", 1.0),
        ("return -2", 0.0),
        ("return 0.25", 0.25),
    ],
)
def test_numbers_are_accepted_and_clamped(body, score):
    g = run_grader(py(f"def grade(sample, item):\n    {body}"), "x")
    assert (g.score, g.error) == (score, None)


def test_clamped_value_is_kept():
    g = run_grader(py("def grade(sample, item):\n    return 1.5"), "x")
    assert g.metadata == {"raw_score": 1.5}
    assert g.rationale == "grade() returned 1.5, clamped to 1"


def test_numpy_float_is_a_number():
    g = run_grader(py("import numpy\ndef grade(sample, item):\n    return numpy.float64(0.5)"), "x")
    assert g.score == 0.5


def test_prints_are_kept_not_protocol():
    g = run_grader(
        py(
            "import sys, os\ndef grade(sample, item):\n    print('hello')\n    os.write(1, b'raw fd')\n    return 0.5"
        ),
        "x",
    )
    assert (g.score, g.metadata["output"]) == (0.5, "hello\n")


def test_top_level_error_fails_every_sample_and_the_run_goes_on():
    grades = grade_many(
        py("import not_a_module_xyz\ndef grade(sample, item):\n    return 1"), ["a", "b"]
    )
    assert [g.error for g in grades] == [
        "python grader: running the source failed: ModuleNotFoundError: No module named 'not_a_module_xyz' (line 1)"
    ] * 2


def test_grade_defined_only_conditionally_is_a_sample_error():
    grades = grade_many(
        py("if False:\n    def grade(sample, item):\n        return 1\nelse:\n    grade = None"),
        ["a"],
    )
    assert (
        grades[0].error
        == "python grader: running the source failed: the source defines no function 'grade(sample, item)'"
    )


# --- limits ----------------------------------------------------------------------------------


def test_timeout_errors_that_sample_and_later_samples_work():
    src = "def grade(sample, item):\n    if sample['output_text'] == 'loop':\n        while True: pass\n    return 1.0"
    grades = grade_many(py(src, timeout=0.5, workers=1), ["loop", "ok", "ok"])
    assert [(g.score, g.error) for g in grades] == [
        (0.0, "python grader: timed out after 0.5 s"),
        (1.0, None),
        (1.0, None),
    ]


def test_memory_limit_errors_that_sample_and_later_samples_work():
    src = (
        "def grade(sample, item):\n    if sample['output_text'] == 'big':\n"
        "        block = bytearray(1024 ** 3)\n    return 1.0"
    )
    grades = grade_many(py(src, memory_limit_mb=256, workers=1), ["big", "ok"])
    assert [(g.score, g.error) for g in grades] == [
        (0.0, "python grader: MemoryError (line 3)"),
        (1.0, None),
    ]


def test_killed_worker_errors_that_sample_only():
    src = "import os\ndef grade(sample, item):\n    if sample['output_text'] == 'die':\n        os._exit(7)\n    return 1.0"
    grades = grade_many(py(src, workers=1), ["die", "ok"])
    assert [(g.score, g.error) for g in grades] == [
        (0.0, "python grader: the grader process exited with code 7"),
        (1.0, None),
    ]


def test_segfault_like_death_names_the_signal():
    src = "import os, signal\ndef grade(sample, item):\n    os.kill(os.getpid(), signal.SIGKILL)"
    g = run_grader(py(src), "x")
    assert g.error == "python grader: the grader process was killed by SIGKILL (out of memory?)"


def test_workers_are_reused_and_replaced_after_a_failure():
    src = (
        "import os\ndef grade(sample, item):\n    print(os.getpid())\n"
        "    if sample['output_text'] == 'fail':\n        raise RuntimeError('x')\n    return 1"
    )
    grades = grade_many(py(src, workers=1), ["a", "b", "fail", "c", "d"])
    pids = [g.metadata["output"] for g in grades]
    assert pids[0] == pids[1] == pids[2] != pids[3] == pids[4]


def test_cwd_is_a_fresh_temporary_folder_and_env_has_no_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-do-not-leak-123")
    src = (
        "import os, json\ndef grade(sample, item):\n"
        "    print(json.dumps([os.getcwd(), os.listdir('.'), sorted(os.environ)]))\n"
        "    open('scratch.txt', 'w').write('x')\n    return 1"
    )
    g = run_grader(py(src), "x")
    cwd, listing, env = json.loads(g.metadata["output"])
    assert os.path.basename(cwd).startswith("ci-evals-python-")
    assert cwd != os.getcwd() and listing == []
    assert "OPENAI_API_KEY" not in env
    assert not os.path.exists(cwd)  # removed when the worker closed


def test_many_samples_concurrently():
    grades = grade_many(
        py("def grade(sample, item):\n    return len(sample['output_text']) / 10"),
        [str(i) for i in range(100)],
    )
    assert [g.score for g in grades] == [len(str(i)) / 10 for i in range(100)]


def test_pool_survives_a_new_event_loop():
    g = make(py("def grade(sample, item):\n    return 1"))
    sample = Sample(id=1, input="q")

    async def once() -> float:
        return (await g.grade(sample, "x", Trajectory.from_text("x"))).score

    assert asyncio.run(once()) == 1.0
    assert asyncio.run(once()) == 1.0
    asyncio.run(g.aclose())


# --- load-time errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source,message",
    [
        ("def grade(sample, item)\n    return 1", "source: syntax error at line 1: expected ':'"),
        (
            "def score(sample, item):\n    return 1",
            "source: no top-level function 'grade(sample, item)' is defined",
        ),
        (
            "def grade(sample):\n    return 1",
            "source: 'grade' must take two positional arguments: grade(sample, item)",
        ),
        (
            "def grade(a, b, c):\n    return 1",
            "source: 'grade' must take two positional arguments: grade(sample, item)",
        ),
        (
            "async def grade(sample, item):\n    return 1",
            "source: 'grade' must be a plain function, not async",
        ),
    ],
)
def test_bad_source_is_config_error(source, message):
    with pytest.raises(ConfigError) as exc:
        make(py(source))
    assert (exc.value.key, exc.value.message) == ("graders.g", message)


@pytest.mark.parametrize(
    "source",
    [
        "def grade(sample, item, extra=None):\n    return 1",
        "def grade(*args):\n    return 1",
        "from math import floor as grade",
        "grade = lambda sample, item: 1.0",
    ],
)
def test_other_ways_to_define_grade_load(source):
    make(py(source))


def test_source_over_256_kb_is_config_error():
    source = "def grade(sample, item):\n    return 1\n" + "#" * (256 * 1024)
    with pytest.raises(ConfigError) as exc:
        make(py(source))
    assert exc.value.message == f"source: {len(source)} bytes, over the 256 KB limit"


def test_loading_runs_no_user_code(tmp_path):
    marker = tmp_path / "ran"
    make(py(f"open({str(marker)!r}, 'w')\ndef grade(sample, item):\n    return 1"))
    assert not marker.exists()


# --- the exercise as a suite, end to end ------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "openai-graders" / "suite.yaml"


def test_exercise_suite_runs_end_to_end(tmp_path):
    from rouge_score.rouge_scorer import RougeScorer

    from ci_evals.cli.app import main

    out = tmp_path / "out"
    assert main(["run", str(EXAMPLE), "--output", str(out), "--quiet", "--no-cache"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    results = {
        r["sample_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())
    }
    scores = {sid: {k: g["score"] for k, g in r["grades"].items()} for sid, r in results.items()}
    expected = {
        "welcome": {
            "greeting": 1.0,
            "word_count": 1.0,
            "signature": 1.0,
            "mentions_product": 1.0,
            "email_quality": 1.0,
        },
        "follow-up": {
            "greeting": 1.0,
            "word_count": 0.5,
            "signature": 1.0,
            "mentions_product": 1.0,
            "email_quality": 1.0,
        },
        "complaint": {
            "greeting": 0.0,
            "word_count": 1.0,
            "signature": 0.5,
            "mentions_product": 1.0,
            "email_quality": 0.25,
        },
        "reminder": {
            "greeting": 0.0,
            "word_count": 0.0,
            "signature": 0.0,
            "mentions_product": 0.0,
            "email_quality": 0.0,
        },
    }
    assert {
        sid: {k: v for k, v in s.items() if k != "similarity"} for sid, s in scores.items()
    } == expected

    # ROUGE-L equals rouge-score called directly on the replayed email and the reference.
    rows = {
        r["id"]: r
        for r in map(json.loads, (EXAMPLE.parent / "dataset.jsonl").read_text().splitlines())
    }
    emails = {
        r["id"]: r["output"]
        for r in map(json.loads, (EXAMPLE.parent / "outputs.jsonl").read_text().splitlines())
    }
    scorer = RougeScorer(["rougeL"])
    rouge = {
        sid: scorer.score(rows[sid]["reference_email"], emails[sid])["rougeL"].fmeasure
        for sid in rows
    }
    assert {sid: s["similarity"] for sid, s in scores.items()} == pytest.approx(
        rouge, abs=1e-9, rel=0
    )

    metrics = summary["metrics"]
    assert {k: m["mean"] for k, m in metrics.items()} == pytest.approx(
        {
            "greeting": 0.5,
            "word_count": 0.625,
            "signature": 0.625,
            "mentions_product": 0.75,
            "similarity": sum(rouge.values()) / 4,
            "email_quality": 0.5625,
        },
        abs=1e-12,
    )
    assert {k: m["label"] for k, m in metrics.items()}["email_quality"] == "Greeting and signature"
    assert all(m["errors"] == 0 for m in metrics.values())
    assert summary["gate"] == {"passed": True}
    assert "rouge-score" in summary["versions"]
