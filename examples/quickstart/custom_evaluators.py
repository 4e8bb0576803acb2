"""A custom grader, found by name because this file sits beside the suite."""

from ci_evals import GradeResult, Sample, grader


@grader
def concise(sample: Sample, submission: str) -> GradeResult:
    """Full marks up to 12 words, then one tenth less per extra word."""
    words = len(submission.split())
    score = 1.0 if words <= 12 else max(0.0, 1.0 - (words - 12) / 10)
    return GradeResult(score=score, rationale=f"{words} words")
