"""Custom graders for suite.yaml: a ``@grader`` here is found by its name (``function: concise``)
because this file sits beside the suite. Add your own: take (sample, submission), return a
GradeResult with a score in [0, 1] and a rationale the reports show."""

from ci_evals import GradeResult, Sample, grader


@grader
def concise(sample: Sample, submission: str) -> GradeResult:
    """Full marks up to 20 words, then one tenth less per extra word."""
    words = len(submission.split())
    score = 1.0 if words <= 20 else max(0.0, 1.0 - (words - 20) / 10)
    return GradeResult(score=score, rationale=f"{words} words")
