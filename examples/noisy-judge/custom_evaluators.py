"""A seeded stand-in for a noisy LLM judge: no model, no key, no server.

A real judge (`rubric`, `model_judge`) scores the same answer differently from one call to the
next. This one does it on purpose: it passes an answer with a fixed probability that depends on
how hard the sample is (its `metadata.difficulty`), and half that when the answer misses the
sample's reference fix (a worse answer is judged worse, but still by coin flips):

    easy 0.95, borderline 0.60, hard 0.15

Each call draws from its own random generator seeded by `NOISY_JUDGE_SEED` (environment), the
sample id and the call's number for that sample (the suite's `num_runs: 3` asks three times), so
a run is reproducible and two seeds are two independent reruns of the same judge.
"""

import os
import random
from collections import Counter

from ci_evals import GradeResult, Sample, grader

PASS_PROBABILITY = {"easy": 0.95, "borderline": 0.60, "hard": 0.15}

# A custom grader is not told which of the `num_runs` repeats it grades, so it numbers its own
# calls per sample (graders run one at a time, so the count is exact).
_calls: Counter[str] = Counter()


@grader
def noisy_judge(sample: Sample, submission: str) -> GradeResult:
    """Pass (1.0) or fail (0.0), drawn with the sample's pass probability."""
    seed = os.environ.get("NOISY_JUDGE_SEED", "0")
    key = (seed, str(sample.id))
    call = _calls[key]
    _calls[key] += 1
    p = PASS_PROBABILITY[sample.metadata.get("difficulty", "borderline")]
    if sample.ground_truth and str(sample.ground_truth).lower() not in submission.lower():
        p /= 2  # the answer misses the fix: judged worse
    passed = random.Random(f"{seed}:{sample.id}:{call}").random() < p
    return GradeResult(
        score=1.0 if passed else 0.0,
        rationale=f"stand-in judge: pass with probability {p:.2f}",
        metadata={"pass_probability": p, "call": call},
    )
