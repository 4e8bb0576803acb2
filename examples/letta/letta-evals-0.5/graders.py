"""Custom grader and extractor for suite.yaml, written as for letta-evals 0.5."""

import json

from letta_evals.decorators import extractor, grader
from letta_evals.models import GradeResult, Sample


def _is_assistant(message) -> bool:
    # letta-evals passes Letta messages (message_type); ci-evals passes normalized ones (role).
    return (
        getattr(message, "message_type", None) == "assistant_message"
        or getattr(message, "role", None) == "assistant"
    )


@extractor
def last_sentence(trajectory, config):
    """The last sentence of the agent's final answer."""
    texts = [
        m.content
        for turn in trajectory
        for m in turn
        if _is_assistant(m) and isinstance(m.content, str) and m.content
    ]
    if not texts:
        return ""
    sentences = [s.strip() for s in texts[-1].split(".") if s.strip()]
    return sentences[-1] if sentences else ""


@grader
def names_capital(sample: Sample, submission: str) -> GradeResult:
    """1.0 when the expected city (the ground truth's last word) is in the submission."""
    city = (sample.ground_truth or "").rstrip(".").split()[-1:]
    ok = bool(city) and city[0].lower() in submission.lower()
    return GradeResult(
        score=1.0 if ok else 0.0,
        rationale=f"expected {city[0] if city else '?'!r} in {submission!r}",
    )


@grader
def asked_about_country(sample: Sample, submission: str) -> GradeResult:
    """1.0 when lookup_capital was called with the country named in the question."""
    try:
        country = json.loads(submission).get("country", "")
    except (ValueError, AttributeError):
        return GradeResult(score=0.0, rationale=f"arguments are not a JSON object: {submission!r}")
    question = sample.input if isinstance(sample.input, str) else " ".join(sample.input)
    ok = bool(country) and country.lower() in question.lower()
    return GradeResult(score=1.0 if ok else 0.0, rationale=f"asked about {country!r}")
