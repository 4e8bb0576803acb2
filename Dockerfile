# The ci-evals GitHub Action image (also the plain CLI: `docker run IMAGE run suite.yaml --dry-run`).
#
# BASE_IMAGE is any Debian-based image with python3 >= 3.11: python:3.12-slim (the default, used
# on GitHub) or a bare Debian with Debian's python3 (the container smoke test builds one with
# debootstrap). Three stages, for size (issue 25):
#   build    installs (apt, pip, the WordNet copy) into /opt/ci-evals and /usr/local/share/nltk_data,
#            then drops what nothing reads at run time: pip, setuptools, the bytecode pip compiles
#            for every module, the packages' test suites, numpy's C headers and f2py, and the
#            symbols of the extension modules (strip; binutils stays in this stage);
#   runtime  the base with those two folders, minus the base's documentation, man pages, locales,
#            apt lists and caches, and Python's own test suite, IDLE and Tk; then the quickstart
#            runs once, offline, to write report.html's compiled template into XDG_CACHE_HOME
#            (0.1 s a run; reports/html.cache_dir), and scripts/warm-bytecode.py imports every
#            module a run of any built-in kind imports, to write exactly their bytecode (without
#            it, every run compiles them again: 0.09 s for a model or judge's aiohttp, 0.13 s for
#            letta-client, 0.48 s for anthropic, 0.25 s for google-genai, 0.40 s for
#            text_similarity's nltk and rouge-score; compiling every module instead makes the
#            image 90 MB larger; docs/containers.md);
#   final    that file system as one layer (FROM scratch), so the files deleted in `runtime` are
#            really gone rather than hidden under a later layer.
# Nothing is compiled from C: every dependency is a wheel or a pure-Python sdist. No compiler, apt
# list, .deb or pip cache reaches the image.
#
# Pinned: the default base is python:3.12-slim by the digest of its multi-arch index (the tag
# stays for readers; a build with the tag alone could change under a green commit), and the
# Python packages come from requirements-lock.txt with their hashes (bash scripts/lock.sh refreshes
# it). Dependabot (.github/dependabot.yml) reads only a FROM line, never an ARG: the first FROM
# below carries the same reference for it, is not used by the build (BuildKit and Buildah skip
# it), and tests/test_supply_lock.py fails while the two differ (copy the new digest to ARG).
ARG BASE_IMAGE=python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea

FROM python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea AS dependabot-base

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1 \
    VIRTUAL_ENV=/opt/ci-evals \
    PATH=/opt/ci-evals/bin:$PATH

# WordNet 3.0 for METEOR from Debian's packages, copied by scripts/install-wordnet.sh into
# /usr/local/share/nltk_data (on NLTK's default search path). A bare Debian python3 also needs
# python3-venv to create the virtualenv.
COPY scripts/install-wordnet.sh scripts/apt-install.sh /tmp/
RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    pkgs="wordnet-base wordnet-sense-index"; \
    python3 -c "import ensurepip, venv" 2>/dev/null || pkgs="$pkgs python3-venv"; \
    apt-get update; \
    apt-get install -y --no-install-recommends $pkgs; \
    bash /tmp/install-wordnet.sh; \
    python3 -m venv "$VIRTUAL_ENV"

# Dependencies first (rebuilt only when the lock changes): requirements-lock.txt, the runtime
# dependencies with the anthropic and google extras (judges of every provider) and the text extra
# (text_similarity's nltk and rouge-score), each version pinned and each file's sha256 checked
# (--require-hashes: a file that differs fails the build). Then the package itself as a regular
# (non-editable) install, without dependencies (the lock has them all; pip check below).
# PIP_CERT (optional; empty means unset) is a CA bundle for pip behind a TLS-intercepting proxy,
# mounted at build time.
ARG PIP_CERT=""
WORKDIR /tmp/build
COPY requirements-lock.txt ./
RUN set -eux; \
    [ -n "${PIP_CERT:-}" ] || unset PIP_CERT; \
    pip install --no-compile --require-hashes -r requirements-lock.txt
COPY pyproject.toml README.md ./
COPY src ./src
RUN set -eux; \
    [ -n "${PIP_CERT:-}" ] || unset PIP_CERT; \
    pip install --no-compile --no-deps .; \
    pip check; \
    pip uninstall -y pip setuptools wheel; \
    site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
    find "$VIRTUAL_ENV" -depth -name __pycache__ -type d -exec rm -rf {} +; \
    find "$site" -depth -type d -name tests -exec rm -rf {} +; \
    rm -rf "$site"/numpy/_core/include "$site"/numpy/f2py; \
    apt-get install -y --no-install-recommends binutils; \
    find "$site" -name '*.so' -type f -not -path '*.libs/*' -exec strip --strip-unneeded {} +; \
    ci-evals --version

FROM ${BASE_IMAGE} AS runtime
COPY --from=build /usr/local/share/nltk_data /usr/local/share/nltk_data
COPY --from=build /opt/ci-evals /opt/ci-evals
COPY examples/quickstart /tmp/quickstart
COPY scripts/warm-bytecode.py /tmp/
RUN set -eux; \
    stdlib=$(/opt/ci-evals/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])'); \
    rm -rf "$stdlib"/test "$stdlib"/idlelib "$stdlib"/tkinter "$stdlib"/turtledemo "$stdlib"/ensurepip/_bundled \
           /usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* /usr/share/lintian \
           /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old /var/log/*.log /root/.cache; \
    cd /tmp/quickstart; \
    XDG_CACHE_HOME=/opt/ci-evals/cache /opt/ci-evals/bin/ci-evals run suite.yaml --dry-run --output /tmp/warm -q >/dev/null; \
    test -n "$(ls /opt/ci-evals/cache/ci-evals/templates)"; \
    /opt/ci-evals/bin/python /tmp/warm-bytecode.py; \
    cd /; rm -rf /tmp/* /tmp/.[!.]*

FROM scratch
COPY --from=runtime / /
LABEL org.opencontainers.image.title="ci-evals" \
      org.opencontainers.image.description="A CI-native evaluation gate for LLM agents and prompts" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV LANG=C.UTF-8 \
    XDG_CACHE_HOME=/opt/ci-evals/cache \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/ci-evals \
    PATH=/opt/ci-evals/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /github/workspace
ENTRYPOINT ["ci-evals", "action"]
