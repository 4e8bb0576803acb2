"""Run one ci-evals command in this process; print its wall time, peak RSS and exit code as JSON."""

import contextlib
import io
import json
import resource
import sys
import time

from ci_evals.cli import main

t0 = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(sys.argv[1:])
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"exit": rc, "wall_s": round(wall, 3), "peak_rss_mb": round(peak, 1)}))
