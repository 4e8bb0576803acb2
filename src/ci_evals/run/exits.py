"""Exit codes, and the one mapping of what escapes a command to one of them.

0 verdict passed; 1 verdict failed, errored or partial; 2 invalid configuration or input (one
line, no traceback); 3 internal error; 128 + n interrupted by signal n (129 SIGHUP, 130 SIGINT,
143 SIGTERM). Light on purpose: the CLI imports it before it knows which command runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from ci_evals._util.errors import ConfigError
from ci_evals._util.redact import scrub

EXIT_PASS, EXIT_GATE, EXIT_CONFIG, EXIT_INTERNAL = 0, 1, 2, 3


def guarded(command: Callable[[], int]) -> int:
    """``command()``'s exit code; a ConfigError is one line and 2, anything else that escapes is 3."""
    try:
        return command()
    except ConfigError as exc:
        print(scrub(f"error: {exc}"), file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    except (SystemExit, GeneratorExit) as exc:  # past argparse, only code of the suite's raises these
        print(scrub(f"error: suite code raised {type(exc).__name__}({exc}) outside any sample; "
                    "no summary was written"), file=sys.stderr)
        return EXIT_INTERNAL
    except Exception:  # a bug of ours: say so, with the traceback, and exit 3
        import traceback

        print(scrub(traceback.format_exc()), end="", file=sys.stderr)
        print("internal error: this is a bug in ci-evals, please report it with the traceback above",
              file=sys.stderr)
        return EXIT_INTERNAL
