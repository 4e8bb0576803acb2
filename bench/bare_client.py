"""The floor of the overhead scenarios: the same calls as bench/suites.py's llm_suite (a model
answer, then a JSON-mode judge call on it, per sample, C samples in flight), made by a bare aiohttp
loop with no orchestration at all. Prints its figures as one JSON line (bench/_measure.py's shape).

    python bench/bare_client.py URL N C LATENCY

On one machine the fake server and the client share the cores, and a Python HTTP client spends
CPU on every call: this loop's ratio to the ideal 2·⌈N/C⌉·latency is what the harness allows any
client, and ci-evals' ratio over it is what its orchestration costs (bench/ab.py ``--bare``).
"""

from __future__ import annotations

import asyncio
import json
import math
import resource
import sys
import time


async def _run(url: str, n: int, c: int) -> tuple[float, int]:
    import aiohttp

    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
    failed = 0
    samples = iter(range(n))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def call(body: dict) -> str:
            async with session.post(
                url + "/chat/completions", data=json.dumps(body).encode(), headers=headers
            ) as resp:
                data = json.loads(await resp.read())
            return data["choices"][0]["message"]["content"]

        async def worker() -> None:
            nonlocal failed
            for i in samples:
                try:
                    answer = await call(
                        {
                            "model": "gpt-4o-mini",
                            "temperature": 0,
                            "max_tokens": 1024,
                            "messages": [
                                {"role": "system", "content": "Answer briefly."},
                                {"role": "user", "content": f"Question {i}: what is {i} + {i}?"},
                            ],
                        }
                    )
                    await call(
                        {
                            "model": "gpt-4o-mini",
                            "temperature": 0,
                            "response_format": {"type": "json_object"},
                            "messages": [
                                {
                                    "role": "user",
                                    "content": "Score 1 if the answer is correct.\n"
                                    f"Q: Question {i}: what is {i} + {i}?\nA: {answer}",
                                }
                            ],
                        }
                    )
                except Exception:
                    failed += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(c)))
        return time.perf_counter() - t0, failed


def measure(url: str, n: int, c: int, latency: float) -> dict:
    """This loop's figures, run as its own process (as ci-evals is measured): ratio, wall_s, cpu_s, errored."""
    import subprocess
    from pathlib import Path

    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), url, str(n), str(c), str(latency)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def main(argv: list[str]) -> int:
    url, n, c, latency = argv[0].rstrip("/"), int(argv[1]), int(argv[2]), float(argv[3])
    wall, failed = asyncio.run(_run(url, n, c))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "ratio": round(wall / (2 * math.ceil(n / c) * latency), 3),
                "wall_s": round(wall, 3),
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                "errored": failed,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
