"""A "lower is better" metric: how far an answer runs past 10 words (0 = concise, 1 = 20+ words over)."""

from ci_evals import GradeResult, grader


@grader
def wordiness(sample, submission):
    extra = max(0, len(submission.split()) - 10)
    return GradeResult(score=min(1.0, extra / 20), rationale=f"{len(submission.split())} words")
