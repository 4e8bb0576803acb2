"""Why Playwright's driver cannot start, in one line a person can act on.

Playwright's Python package talks to a Node.js driver it ships (``playwright/driver/node``). When
that binary cannot start, Playwright says only that the connection to the driver closed. The
usual cause on a minimal Debian is a shared library the binary links against (libatomic.so.1,
from the package libatomic1); this runs the binary once and turns the loader's complaint into a
message that names the library, the Debian package and the script that installs it.
"""

from __future__ import annotations

import re
import subprocess

# The libraries Playwright's Node driver needs beyond glibc, and the Debian packages that ship them.
PACKAGES = {
    "libatomic.so.1": "libatomic1",
    "libstdc++.so.6": "libstdc++6",
    "libgcc_s.so.1": "libgcc-s1",
}
FIX = "run `bash scripts/install-chromium.sh` (it installs Debian's chromium and libatomic1)"


def driver_executable() -> str:
    """The path of Playwright's Node binary."""
    from playwright._impl._driver import compute_driver_executable

    node = compute_driver_executable()
    return str(node[0] if isinstance(node, tuple) else node)


def driver_problem(node: str) -> str | None:
    """None when ``node --version`` runs, else one line saying why it does not."""
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        return f"Playwright's driver {node} cannot start: {e.strerror}; reinstall the test extras (pip install '.[test]')"
    if done.returncode == 0:
        return None
    err = done.stderr.strip()
    missing = re.search(r"error while loading shared libraries: (\S+?):", err)
    if missing:
        lib = missing.group(1)
        package = PACKAGES.get(lib)
        where = (
            f"the Debian package {package}"
            if package
            else f"the package that ships it (apt-file search {lib})"
        )
        return f"Playwright's driver {node} cannot start: {lib} is missing; install {where}: {FIX}"
    first = err.splitlines()[0] if err else f"exit code {done.returncode}"
    return f"Playwright's driver {node} cannot start: {first}"
