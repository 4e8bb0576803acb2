"""Run one ci-evals command in this process; print its wall time, CPU time, peak RSS and exit code as JSON.

CPU time is the whole process's user + system seconds (interpreter start and imports included),
its worker processes' too (a CPU-bound run is split across cores: ci_evals.run.lanes); peak RSS
is this process's, and ``workers_peak_rss_mb`` the largest worker's (they share pages with it).
"""

import contextlib
import io
import json
import resource
import sys
import time

try:
    from ci_evals.cli.app import main
except (
    ImportError
):  # bench/ab.py's base may be a tree from before the stage packages (ci_evals/cli.py)
    from ci_evals.cli import main

t0 = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(sys.argv[1:])
wall = time.perf_counter() - t0
usage = resource.getrusage(resource.RUSAGE_SELF)
workers = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = usage.ru_utime + usage.ru_stime + workers.ru_utime + workers.ru_stime
print(
    json.dumps(
        {
            "exit": rc,
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "workers_peak_rss_mb": round(workers.ru_maxrss / 1024, 1),
        }
    )
)
