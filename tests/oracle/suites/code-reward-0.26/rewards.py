"""Reward composers of the oracle's Letta Code suite (letta-evals 0.21+ ``@reward_composer``)."""

from letta_evals import RewardOutput, reward_composer


@reward_composer
def weighted(ctx):
    """0.7 x judge + 0.3 x answer, zero when the answer is not printable ASCII."""
    if ctx.grades["ascii"].score < 1.0:
        return RewardOutput(score=0.0, metadata={"reason": "not ascii"})
    return RewardOutput(score=0.7 * ctx.grades["judge"].score + 0.3 * ctx.grades["answer"].score)
