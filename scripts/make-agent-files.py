#!/usr/bin/env python3
"""Regenerate every .af file ci-evals ships by exporting agents made on a real Letta server.

    scripts/letta-server.sh start && eval "$(scripts/letta-server.sh env)"
    python scripts/make-agent-files.py          # writes the three files below, prints a line each
    python scripts/make-agent-files.py --check  # exit 1 if a shipped file differs in what it defines

Each agent is created through the REST API (tools upserted from their Python source), exported
with ``GET /v1/agents/{id}/export``, and deleted. The export is what a real server writes (system
message, in-context message ids, tool schemas the server derived); two things are then made
portable: the ids and timestamps the server chose are replaced by stable ones, so regenerating
gives the same file, and the model becomes ``openai/gpt-4o-mini`` on api.openai.com (the test
server's handle is ``openai-proxy/...`` on loopback, which means nothing elsewhere; a suite picks
another model with ``model_handles`` or the judge's ``model``).

Needs letta-client (in ci-evals' own venv) and $LETTA_BASE_URL, $LETTA_TEST_MODEL.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PUBLIC_MODEL = {
    "model": "gpt-4o-mini",
    "handle": "openai/gpt-4o-mini",
    "model_endpoint": "https://api.openai.com/v1",
    "model_endpoint_type": "openai",
    "provider_name": "openai",
    "provider_category": "base",
}
PUBLIC_EMBEDDING = {
    "embedding_endpoint": "https://api.openai.com/v1",
    "embedding_endpoint_type": "openai",
}

LOOKUP_CAPITAL = '''def lookup_capital(country: str) -> str:
    """Look up the capital city of a country.

    Args:
        country (str): The country's English name, e.g. "France".

    Returns:
        str: A sentence naming the capital, or saying it is unknown.
    """
    capitals = {"france": "Paris", "japan": "Tokyo", "kenya": "Nairobi", "peru": "Lima",
                "australia": "Sydney"}
    city = capitals.get(country.strip().lower())
    if city is None:
        return f"I do not know the capital of {country}."
    return f"The capital of {country} is {city}."
'''

SUBMIT_GRADE = '''def submit_grade(score: float, rationale: str) -> str:
    """Record the grade for the answer under review.

    Args:
        score (float): 0.0 (fails the rubric) to 1.0 (fully meets it).
        rationale (str): One or two sentences on why.

    Returns:
        str: A confirmation that the grade was recorded.
    """
    return f"grade recorded: {score}"
'''

JUDGE_SYSTEM = (
    "You are an evaluation judge for AI agents. Each message gives you a rubric, the task another "
    "agent was given and that agent's answer. Judge only the answer, strictly by the rubric; never "
    "solve the task yourself. Report your verdict by calling submit_grade exactly once with a score "
    "between 0.0 and 1.0 and a short rationale, then stop."
)

AGENTS = {
    "examples/letta/agent-judge/capital-agent.af": dict(
        name="capital-agent",
        description="Answers capital-city questions with a lookup tool.",
        system=(
            "You answer questions about capital cities. Always call lookup_capital with the country's name "
            "and answer with the sentence it returns, nothing else."
        ),
        tools=[LOOKUP_CAPITAL],
        memory_blocks=[
            {"label": "human", "value": "", "description": "What the agent knows about the user."}
        ],
        include_base_tools=True,
        tool_rules=[],
    ),
    "examples/letta/agent-judge/judge.af": dict(
        name="capital-judge",
        description="Grades capital-city answers against a rubric.",
        system=JUDGE_SYSTEM,
        tools=[SUBMIT_GRADE],
        memory_blocks=[],
        include_base_tools=False,
        tool_rules=[{"type": "exit_loop", "tool_name": "submit_grade"}],
    ),
    "src/ci_evals/data/letta_judge.af": dict(
        name="ci-evals-judge",
        description="Grades an agent's answer against a rubric.",
        system=JUDGE_SYSTEM,
        tools=[SUBMIT_GRADE],
        memory_blocks=[],
        include_base_tools=False,
        tool_rules=[{"type": "exit_loop", "tool_name": "submit_grade"}],
    ),
}

UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
STAMPS = [
    (
        re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"),
        "2026-01-01T00:00:00Z",
    ),
    (
        re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [AP]M UTC[+-]\d{4}"),
        "2026-01-01 12:00:00 AM UTC+0000",
    ),
]


def portable(doc: dict) -> dict:
    """Stable UUIDs (numbered in order of appearance) and timestamps, and the public model."""
    seen: dict[str, str] = {}

    def stable(m: re.Match) -> str:
        return seen.setdefault(m.group(0), f"{len(seen):08d}-0000-4000-8000-000000000000")

    text = UUID.sub(stable, json.dumps(doc))
    for pattern, fixed in STAMPS:
        text = pattern.sub(fixed, text)
    doc = json.loads(text)
    for agent in doc.get("agents") or []:
        agent["llm_config"] = {**(agent.get("llm_config") or {}), **PUBLIC_MODEL}
        agent["embedding_config"] = {**(agent.get("embedding_config") or {}), **PUBLIC_EMBEDDING}
    return doc


def make(client, spec: dict, model: str, embedding: str) -> dict:
    tool_ids = [client.tools.upsert(source_code=src).id for src in spec["tools"]]
    agent = client.agents.create(
        name=spec["name"],
        description=spec["description"],
        system=spec["system"],
        model=model,
        embedding=embedding,
        memory_blocks=spec["memory_blocks"],
        tool_ids=tool_ids,
        include_base_tools=spec["include_base_tools"],
        tool_rules=spec["tool_rules"],
        tags=["ci-evals"],
    )
    try:
        raw = client.agents.export_file(agent_id=agent.id)
    finally:
        client.agents.delete(agent_id=agent.id)
    return json.loads(raw) if isinstance(raw, (str, bytes)) else raw


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--check", action="store_true", help="compare with the shipped files instead of writing"
    )
    args = ap.parse_args()
    base = os.environ.get("LETTA_BASE_URL")
    model = os.environ.get("LETTA_TEST_MODEL")
    if not base or not model:
        print(
            'set LETTA_BASE_URL and LETTA_TEST_MODEL: eval "$(scripts/letta-server.sh env)"',
            file=sys.stderr,
        )
        return 2
    from letta_client import Letta

    client = Letta(base_url=base, api_key=os.environ.get("LETTA_API_KEY") or "local", timeout=120)
    embedding = os.environ.get("LETTA_TEST_EMBEDDING", "openai/text-embedding-3-small")
    version = client.health().version
    differ = 0
    for rel, spec in AGENTS.items():
        doc = portable(make(client, spec, model, embedding))
        path = REPO / rel
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        if args.check:
            same = path.exists() and path.read_text(encoding="utf-8") == text
            differ += not same
            print(f"{'same' if same else 'DIFFERS'}: {rel}")
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {rel} ({len(text):,} bytes) from a Letta {version} export")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
