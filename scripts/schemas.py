"""Write (or with --check, compare) the published JSON Schemas of summary.json and of a
results.jsonl line, generated from the typed contract (ci_evals.results.records)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ci_evals.results.contract import json_schemas, schema_text

DOCS = Path(__file__).resolve().parent.parent / "docs" / "schemas"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when docs/schemas/ drifted")
    args = parser.parse_args(argv)
    stale = []
    for name, schema in json_schemas().items():
        path = DOCS / name
        text = schema_text(schema)
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            DOCS.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"docs/schemas/ is stale ({', '.join(stale)}): run python scripts/schemas.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
