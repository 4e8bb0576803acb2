"""text_similarity: our scores equal the reference libraries called directly, pinned values,
the seed's examples, the unicode tokenizer, WordNet checks and cosine over a local fake server."""

from __future__ import annotations

import asyncio
import re
from importlib.metadata import version
from pathlib import Path

import pytest

from ci_evals._util.errors import ConfigError
from ci_evals.config.specs import Context
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.text_similarity import library_versions, unicode_tokens, wordnet_missing
from tests.fakes.openai_server import EMBEDDINGS, openai_env, openai_server  # noqa: F401
from tests.test_string_check import grade_all, make, run_grader

HAVE_WORDNET = wordnet_missing() is None
needs_wordnet = pytest.mark.skipif(
    not HAVE_WORDNET, reason="WordNet not installed: run scripts/install-wordnet.sh"
)

# (input, reference): English, punctuation, case, empty strings, non-Latin text.
PAIRS = [
    ("fuzzy wuzzy was a bear", "fuzzy wuzzy had no hair"),
    ("Paris", "paris"),
    ("The capital of France is Paris.", "Paris is the capital of France."),
    ("The cats are running quickly", "the cat runs quick"),
    ("Don't stop, it's 3.5 km (approx)!", "Do not stop; it is about 3.5 km."),
    ("The quick brown fox jumps over the lazy dog.", "A quick brown dog jumps over the lazy fox!"),
    ("a b c", "a b c"),
    ("", ""),
    ("", "something"),
    ("something", ""),
    ("東京は日本の首都です。", "東京は日本の首都です。"),
    ("東京は日本の首都です。", "日本の首都は東京です。"),
    ("Привет, как дела?", "Привет, как у тебя дела?"),
    ("café au lait", "cafe au lait"),
    ("Résumé: 5 years; skills — Python, SQL.", "resume 5 years skills python sql"),
]


def tokens(text: str) -> list[str]:
    """The documented default tokenizer, restated."""
    return re.findall(r"\w+|[^\w\s]", text)


def reference(metric: str, text: str, ref: str, tokenizer: str = "default") -> float:
    """The metric computed by calling the library directly with the documented settings."""
    tok = unicode_tokens if tokenizer == "unicode" else tokens
    if metric == "fuzzy_match":
        from rapidfuzz import fuzz, utils

        return fuzz.WRatio(text, ref, processor=utils.default_process) / 100
    if metric == "bleu":
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

        return sentence_bleu(
            [tok(ref)],
            tok(text),
            weights=(0.25, 0.25, 0.25, 0.25),
            smoothing_function=SmoothingFunction().method4,
        )
    if metric == "gleu":
        from nltk.translate.gleu_score import sentence_gleu

        return sentence_gleu([tok(ref)], tok(text))
    if metric == "meteor":
        from nltk.translate.meteor_score import meteor_score

        return meteor_score([tok(ref)], tok(text))
    from rouge_score import rouge_scorer

    kind = {"rouge_l": "rougeL"}.get(metric, metric.replace("_", ""))

    class Tok:
        def tokenize(self, s: str) -> list[str]:
            return unicode_tokens(s)

    scorer = rouge_scorer.RougeScorer(
        [kind], use_stemmer=False, tokenizer=Tok() if tokenizer == "unicode" else None
    )
    return scorer.score(ref, text)[kind].fmeasure


def scores(metric: str, tokenizer: str | None = None) -> list[float]:
    """Our grader's scores on every pair (one grader, graded concurrently)."""
    raw = {
        "type": "text_similarity",
        "name": metric,
        "input": "{{ sample.output_text }}",
        "reference": "{{ item.reference }}",
        "evaluation_metric": metric,
    }
    if tokenizer:
        raw["tokenizer"] = tokenizer
    cases = [
        (Sample(id=i, input="q", extra_vars={"reference": r}), t, None)
        for i, (t, r) in enumerate(PAIRS)
    ]
    grades = asyncio.run(grade_all(make(raw), cases))
    assert all(g.error is None for g in grades)
    return [g.score for g in grades]


LIB_METRICS = [
    "fuzzy_match",
    "bleu",
    "gleu",
    "rouge_1",
    "rouge_2",
    "rouge_3",
    "rouge_4",
    "rouge_5",
    "rouge_l",
]


@pytest.mark.parametrize("metric", LIB_METRICS + [pytest.param("meteor", marks=needs_wordnet)])
def test_matches_reference_library(metric):
    expected = [reference(metric, t, r) for t, r in PAIRS]
    assert scores(metric) == pytest.approx(expected, abs=1e-9, rel=0)


@pytest.mark.parametrize(
    "metric",
    ["bleu", "gleu", "rouge_1", "rouge_2", "rouge_l", pytest.param("meteor", marks=needs_wordnet)],
)
def test_unicode_tokenizer_matches_reference_library(metric):
    expected = [reference(metric, t, r, "unicode") for t, r in PAIRS]
    assert scores(metric, "unicode") == pytest.approx(expected, abs=1e-9, rel=0)


# Pinned values (rapidfuzz 3.14.6, nltk 3.10.4, rouge-score 0.1.2): a library upgrade that
# changes a score fails here, not silently in users' gates.
PINNED = {
    "fuzzy_match": [0.7555555555555555, 1.0, 0.95, 0.855],
    "bleu": [0.12121093525642128, 0.0, 0.22961813530951883, 0.0],
    "gleu": [0.21428571428571427, 0.0, 0.4090909090909091, 0.0],
    "rouge_1": [0.4, 1.0, 1.0, 0.2222222222222222],
    "rouge_2": [0.25, 0.0, 0.6, 0.0],
    "rouge_l": [0.4, 1.0, 0.6666666666666666, 0.2222222222222222],
}


@pytest.mark.parametrize("metric", list(PINNED))
def test_pinned_scores(metric):
    assert scores(metric)[:4] == pytest.approx(PINNED[metric], abs=1e-12, rel=0)


@needs_wordnet
def test_pinned_meteor():
    assert scores("meteor")[:4] == pytest.approx(
        [0.37500000000000006, 0.5, 0.9067055393586005, 0.6233062330623306], abs=1e-12, rel=0
    )


def test_empty_strings_score_zero():
    for metric in LIB_METRICS:
        assert scores(metric)[7:10] == [0.0, 0.0, 0.0], metric


def test_default_rouge_tokenizer_drops_japanese_and_unicode_keeps_it():
    same = PAIRS[10]
    assert scores("rouge_l")[10] == 0.0
    assert scores("rouge_l", "unicode")[10] == 1.0
    assert reference("rouge_1", *same) == 0.0


def test_unicode_tokens():
    assert unicode_tokens("東京は首都。 Hello, World_x café") == [
        "東",
        "京",
        "は",
        "首",
        "都",
        "hello",
        "world",
        "x",
        "café",
    ]
    assert unicode_tokens("ภาษา") == ["ภ", "า", "ษ", "า"]


def test_default_tokens_split_punctuation_and_keep_case():
    from ci_evals.graders.text_similarity import default_tokens

    assert default_tokens("Don't stop, Paris.") == ["Don", "'", "t", "stop", ",", "Paris", "."]


# --- the seed's examples --------------------------------------------------------------------

ROUGE_L_SEED = {
    "type": "text_similarity",
    "name": "ROUGE-L score",
    "input": "{{ sample.output_text }}",
    "reference": "{{ item.reference_summary }}",
    "evaluation_metric": "rouge_l",
    "pass_threshold": 0.40,
}
SEMANTIC_SEED = {
    "type": "text_similarity",
    "name": "Semantic match",
    "input": "{{ sample.output_text }}",
    "reference": "{{ item.expected_answer }}",
    "evaluation_metric": "cosine",
    "pass_threshold": 0.85,
}


def test_seed_rouge_l_summary():
    g = run_grader(
        ROUGE_L_SEED, "The cat sat on the mat.", reference_summary="A cat was sitting on the mat."
    )
    # LCS "cat on the mat" = 4 of 6 and 7 tokens: F1 = 2 * (4/6) * (4/7) / (4/6 + 4/7).
    assert g.score == pytest.approx(8 / 13, abs=1e-12)
    assert g.rationale == "rouge_l = 0.6154"
    assert make(ROUGE_L_SEED).spec.pass_threshold == 0.40


def test_seed_fuzzy_match_equals_seeds_python_example():
    # The seed's Python-grader example: fuzz.WRatio(output, reference, processor=default_process) / 100.
    raw = {
        "type": "text_similarity",
        "name": "f",
        "reference": "{{ item.reference_answer }}",
        "evaluation_metric": "fuzzy_match",
        "pass_threshold": 0.8,
    }
    g = run_grader(
        raw, "The capital of France is Paris.", reference_answer="Paris is the capital of France."
    )
    assert g.score == 0.95


def test_seed_cosine_semantic_match(openai_env):  # noqa: F811
    openai_env.script(
        {
            "object": "list",
            "model": "text-embedding-3-large",
            "data": [
                {"index": 1, "embedding": [0.6, 0.8, 0.0]},
                {"index": 0, "embedding": [1.0, 0.0, 0.0]},
            ],
            "usage": {"prompt_tokens": 9, "total_tokens": 9},
        }
    )
    g = run_grader(SEMANTIC_SEED, "Paris is the capital.", expected_answer="The capital is Paris.")
    assert g.score == pytest.approx(0.6, abs=1e-15)
    assert g.metadata == {
        "metric": "cosine",
        "usage": {"prompt_tokens": 9, "completion_tokens": 0},
        "cache_hits": 0,
        "retries": 0,
        "cost_usd": pytest.approx(9 * 0.13 / 1e6, rel=1e-12),  # genai-prices: $0.13 per Mtok
    }
    assert openai_env.bodies(EMBEDDINGS) == [
        {
            "model": "text-embedding-3-large",
            "input": ["Paris is the capital.", "The capital is Paris."],
        }
    ]


def test_cosine_of_identical_texts_is_one(openai_env):  # noqa: F811
    g = run_grader(SEMANTIC_SEED, "same words here", expected_answer="same words here")
    assert g.score == pytest.approx(1.0, abs=1e-12)


def test_cosine_negative_similarity_floors_at_zero(openai_env):  # noqa: F811
    openai_env.script(
        {"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [-1.0, 0.0]}]}
    )
    assert run_grader(SEMANTIC_SEED, "a", expected_answer="b").score == 0.0


def test_cosine_empty_text_scores_zero_without_a_call(openai_env):  # noqa: F811
    g = run_grader(SEMANTIC_SEED, "", expected_answer="b")
    assert (g.score, g.error, openai_env.count(EMBEDDINGS)) == (0.0, None, 0)


def test_cosine_endpoint_error_is_a_sample_error(openai_env):  # noqa: F811
    openai_env.fault("400", path=EMBEDDINGS)
    g = run_grader(SEMANTIC_SEED, "a", expected_answer="b")
    assert g.score == 0.0
    assert g.error == f"embeddings: {openai_env.url}/embeddings: HTTP 400: injected 400"
    assert "sk-test" not in g.error


def test_cosine_custom_model_and_endpoint(openai_server, monkeypatch):  # noqa: F811
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MY_KEY", "sk-other-key-987654")
    raw = dict(
        SEMANTIC_SEED,
        embedding_model="text-embedding-3-small",
        base_url=openai_server.url,
        api_key_env="MY_KEY",
    )
    run_grader(raw, "x", expected_answer="y")
    req = openai_server.requests[-1]
    assert req.body["model"] == "text-embedding-3-small"
    assert req.headers["authorization"] == "Bearer sk-other-key-987654"


# --- configuration errors --------------------------------------------------------------------


def test_unknown_metric_is_config_error():
    with pytest.raises(ConfigError) as exc:
        make(
            {
                "type": "text_similarity",
                "name": "x",
                "reference": "r",
                "evaluation_metric": "rouge_6",
            }
        )
    assert exc.value.key == "graders.g.evaluation_metric"


def test_tokenizer_with_fuzzy_match_is_config_error():
    with pytest.raises(ConfigError) as exc:
        make(
            {
                "kind": "text_similarity",
                "reference": "r",
                "evaluation_metric": "fuzzy_match",
                "tokenizer": "unicode",
            }
        )
    assert (
        exc.value.message
        == "tokenizer: not used by evaluation_metric 'fuzzy_match' (only bleu, gleu, meteor, rouge_*)"
    )


def test_embedding_model_without_cosine_is_config_error():
    with pytest.raises(ConfigError) as exc:
        make(
            {
                "kind": "text_similarity",
                "reference": "r",
                "evaluation_metric": "bleu",
                "embedding_model": "m",
            }
        )
    assert exc.value.message == "embedding_model: only used with evaluation_metric 'cosine'"


def test_meteor_without_wordnet_fails_validation(monkeypatch, tmp_path):
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(ConfigError) as exc:
        make(
            {"kind": "text_similarity", "reference": "r", "evaluation_metric": "meteor"},
            Context(Path("."), offline=True),
        )
    msg = exc.value.message
    assert msg.startswith(
        f"evaluation_metric 'meteor' needs the WordNet corpus, which NLTK cannot find (searched {tmp_path})"
    )
    assert "scripts/install-wordnet.sh" in msg


def test_validation_imports_no_similarity_library():
    import subprocess
    import sys

    code = (
        "import sys; from pathlib import Path; from ci_evals.graders.base import build_grader; "
        "from ci_evals.config.specs import Context; "
        "build_grader('g', {'kind': 'text_similarity', 'reference': 'r', 'evaluation_metric': 'rouge_l'}, "
        "Context(Path('.'), offline=True)); "
        "print(sorted(m for m in ('nltk', 'rouge_score', 'rapidfuzz', 'openai') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# --- versions ------------------------------------------------------------------------------


def test_library_versions():
    assert library_versions() == {
        "nltk": version("nltk"),
        "rouge-score": version("rouge-score"),
        "rapidfuzz": version("rapidfuzz"),
    }


@needs_wordnet
def test_meteor_grader_versions_include_wordnet():
    g = make({"kind": "text_similarity", "reference": "r", "evaluation_metric": "meteor"})
    asyncio.run(g.start())
    assert g.versions() == {"nltk": version("nltk"), "wordnet": "3.0"}


def test_trajectory_is_not_needed_beyond_output_text():
    g = run_grader(
        {
            "kind": "text_similarity",
            "reference": "{{ item.ground_truth }}",
            "evaluation_metric": "rouge_1",
        },
        "Paris",
        Trajectory(),
        ground_truth="Paris",
    )
    assert g.score == 1.0
