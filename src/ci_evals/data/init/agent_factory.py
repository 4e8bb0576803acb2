"""Builds one fresh Letta agent per sample (``agent_script: agent_factory.py:create_agent``).

Replace the model, memory and tools with your agent's. The server and key come from
LETTA_BASE_URL and LETTA_API_KEY (or ``base_url``/``api_key`` in suite.yaml).
"""


async def create_agent(client, sample) -> str:
    agent = await client.agents.create(
        name=f"ci-evals-{sample.id}",
        model="openai/gpt-4o-mini",
        embedding="openai/text-embedding-3-small",
        memory_blocks=[{"label": "persona", "value": "I answer questions in one short sentence."}],
    )
    return agent.id
