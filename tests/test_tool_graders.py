"""The four built-in tool graders, with every example the seeds give, and custom graders."""

from __future__ import annotations

import pytest

from ci_evals.core.sample import Sample
from ci_evals.graders.tool import ascii_printable_only, contains, exact_match, regex_match

UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
EMAIL = "[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}"


def s(gt=None) -> Sample:
    return Sample(id=0, input="q", ground_truth=gt)


@pytest.mark.parametrize(
    ("gt", "sub", "score", "rationale"),
    [
        ("4", "4", 1.0, "Exact match: true"),
        ("4", "four", 0.0, "Exact match: false"),
        ("4", "  4\n", 1.0, "Exact match: true"),
        (" Paris ", "Paris", 1.0, "Exact match: true"),
        ("Paris", "paris", 0.0, "Exact match: false"),
    ],
)
def test_exact_match_is_trimmed_and_case_sensitive(gt, sub, score, rationale):
    g = exact_match(s(gt), sub)
    assert (g.score, g.rationale) == (score, rationale)


@pytest.mark.parametrize(
    ("sub", "score"),
    [
        ("The capital is Paris", 1.0),
        ("The capital is paris", 1.0),
        ("The capital is Lyon", 0.0),
    ],
)
def test_contains_ignores_case(sub, score):
    g = contains(s("Paris"), sub)
    assert g.score == score
    assert g.rationale == f"Contains ground_truth: {'true' if score else 'false'}"


def test_contains_does_not_trim_ground_truth():
    assert contains(s(" Paris"), "Paris!").score == 0.0


@pytest.mark.parametrize(
    ("gt", "sub", "score"),
    [
        (UUID, "550e8400-e29b-41d4-a716-446655440000", 1.0),
        (UUID, "not-a-uuid", 0.0),
        ("\\d+", "the answer is 42", 1.0),
        (EMAIL, "write to ada@example.org today", 1.0),
    ],
)
def test_regex_match_searches(gt, sub, score):
    g = regex_match(s(gt), sub)
    assert g.score == score
    assert g.rationale == f"Regex match: {'true' if score else 'false'}"


def test_regex_match_invalid_pattern_scores_zero_with_the_error():
    g = regex_match(s("([a-z"), "abc")
    assert g.score == 0.0
    assert g.rationale == "Invalid regex pattern: unterminated character set at position 1"


@pytest.mark.parametrize("fn", [exact_match, contains, regex_match])
@pytest.mark.parametrize("gt", [None, ""])
def test_graders_needing_ground_truth_score_zero_without_it(fn, gt):
    g = fn(s(gt), "anything")
    assert (g.score, g.rationale) == (0.0, "No ground_truth answer provided")


@pytest.mark.parametrize(
    ("sub", "score"),
    [
        ("Hello, World!\n", 1.0),
        ("Hello 🌍", 0.0),
        ("", 1.0),
        ("a\r\nb", 1.0),
        ("tab\there", 0.0),
        ("~ ", 1.0),
    ],
)
def test_ascii_printable_only(sub, score):
    assert ascii_printable_only(s(), sub).score == score


def test_ascii_printable_only_lists_up_to_five_offenders():
    g = ascii_printable_only(s(), "é ü ö ä ß ñ ç")
    assert g.rationale == "Non-printable-ASCII characters: 'é', 'ü', 'ö', 'ä', 'ß' (+2 more)"
