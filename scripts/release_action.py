"""Point a release's action.yml at the published image, so workflows never rebuild it.

On main, action.yml says ``image: Dockerfile``: the Action builds its image on every workflow run
(about a minute and 250 MB of downloads), which is what development wants. A release must not:
the release workflow (.github/workflows/release.yml) pushes the image to GHCR, then runs

    python scripts/release_action.py ghcr.io/OWNER/REPO:vX.Y.Z

which rewrites the one ``image: Dockerfile`` line of action.yml to
``image: docker://ghcr.io/OWNER/REPO:vX.Y.Z`` and commits that on top of the tagged commit (the
workflow moves the tags to it). Anything else (no such line, two of them, an image reference that
is not lower-case ``ghcr.io/owner/repo:vX.Y.Z``) is one line on stderr and exit 2, so a release
never ships an action.yml that still builds or points nowhere.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^(  image: )Dockerfile[ \t]*$", re.M)
IMAGE = re.compile(
    r"ghcr\.io/[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*:v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?"
)


def released(text: str, image: str) -> str:
    """action.yml's text with its image line pointing at ``docker://image``."""
    if not IMAGE.fullmatch(image):
        raise ValueError(f"image {image!r} is not ghcr.io/owner/repo:vX.Y.Z (lower case)")
    found = LINE.findall(text)
    if len(found) != 1:
        raise ValueError(
            f"action.yml has {len(found)} 'image: Dockerfile' lines under runs:, expected 1"
        )
    return LINE.sub(lambda m: f"{m.group(1)}docker://{image}", text)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2):
        print("usage: python scripts/release_action.py IMAGE [ACTION_YML]", file=sys.stderr)
        return 2
    path = Path(args[1]) if len(args) == 2 else ROOT / "action.yml"
    try:
        path.write_text(released(path.read_text(encoding="utf-8"), args[0]), encoding="utf-8")
    except (OSError, ValueError) as e:
        print(f"release_action: {path}: {e}", file=sys.stderr)
        return 2
    print(f"release_action: {path}: image: docker://{args[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
