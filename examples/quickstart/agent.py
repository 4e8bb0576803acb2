"""A stand-in agent for the quickstart: reads a sample as JSON on stdin, answers on stdout.

Replace it with your own program (or use a `model`, `agent` or `http` target). It prints JSON
`{"messages": [...]}` so the trajectory holds a tool call too; plain text output works as well.
"""

import json
import sys

ANSWERS = {
    "capital of France": "The capital of France is Paris.",
    "capital of Japan": "Tokyo is the capital of Japan.",
    "2 + 2": "ANSWER: 4",
    "6 * 7": "ANSWER: 42",
    "my name": "Your name is Ada.",
    "sky": "The sky is blue on a clear day.",
}

sample = json.load(sys.stdin)
turns = sample["input"] if isinstance(sample["input"], list) else [sample["input"]]
messages = []
for text in turns:
    messages.append({"role": "user", "content": text})
    reply = next((a for k, a in ANSWERS.items() if k in text), "Nice to meet you!")
    if "2 + 2" in text or "6 * 7" in text:
        expr = "2 + 2" if "2 + 2" in text else "6 * 7"
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "name": "calculator",
                        "arguments": json.dumps({"expression": expr}),
                    }
                ],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": "c1", "name": "calculator", "content": str(eval(expr))}
        )
    messages.append({"role": "assistant", "content": reply})
print(json.dumps({"messages": messages}))
