"""Agent factory for suite-factory.yaml, written as for letta-evals 0.5."""

from letta_evals.decorators import agent_factory
from letta_evals.models import Sample


@agent_factory
async def make_agent(client, sample: Sample) -> str:
    """A fresh agent whose "human" block starts with the user's name from agent_args."""
    args = sample.agent_args or {}
    agent = await client.agents.create(
        name=f"notes-agent-{sample.id}",
        model=args.get("model", "openai/gpt-4o-mini"),
        embedding="openai/text-embedding-3-small",
        memory_blocks=[
            {"label": "human", "value": f"Name: {args.get('user_name', 'unknown')}\n"},
            {"label": "persona", "value": "I note down what the user tells me about themselves."},
        ],
    )
    return agent.id
