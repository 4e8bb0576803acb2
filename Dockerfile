# The ci-evals GitHub Action image (also the plain CLI: `docker run IMAGE run suite.yaml --dry-run`).
#
# BASE_IMAGE is any Debian-based image with python3 >= 3.11: python:3.12-slim (the default, used
# on GitHub) or a bare Debian with Debian's python3 (the container smoke test builds one with
# debootstrap). Two stages: the first installs (apt, pip, the WordNet copy), the second takes only
# the virtualenv and the WordNet data, so no apt lists, .deb files, pip, setuptools or build folder
# end up in the image. Nothing is compiled: every dependency is a wheel or a pure-Python sdist.
ARG BASE_IMAGE=python:3.12-slim

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    VIRTUAL_ENV=/opt/ci-evals \
    PATH=/opt/ci-evals/bin:$PATH

# WordNet 3.0 for METEOR from Debian's packages, copied by scripts/install-wordnet.sh into
# /usr/local/share/nltk_data (on NLTK's default search path). A bare Debian python3 also needs
# python3-venv to create the virtualenv.
COPY scripts/install-wordnet.sh /tmp/install-wordnet.sh
RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    pkgs="wordnet-base wordnet-sense-index"; \
    python3 -c "import ensurepip, venv" 2>/dev/null || pkgs="$pkgs python3-venv"; \
    apt-get update; \
    apt-get install -y --no-install-recommends $pkgs; \
    bash /tmp/install-wordnet.sh; \
    python3 -m venv "$VIRTUAL_ENV"

# Dependencies first (rebuilt only when pyproject.toml changes), with the anthropic and google
# extras (judges of every provider), then the package itself as a regular (non-editable) install.
# PIP_CERT (optional) is a CA bundle for pip behind a TLS-intercepting proxy, mounted at build time.
ARG PIP_CERT
WORKDIR /tmp/build
COPY pyproject.toml README.md ./
RUN set -eux; \
    [ -n "${PIP_CERT:-}" ] || unset PIP_CERT; \
    python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; extras = p['optional-dependencies']; print('\n'.join(p['dependencies'] + extras['anthropic'] + extras['google']))" > requirements.txt; \
    pip install -r requirements.txt
COPY src ./src
RUN set -eux; \
    [ -n "${PIP_CERT:-}" ] || unset PIP_CERT; \
    pip install --no-deps .; \
    pip check; \
    pip uninstall -y pip setuptools wheel; \
    ci-evals --version

FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="ci-evals" \
      org.opencontainers.image.description="A CI-native evaluation gate for LLM agents and prompts" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/ci-evals \
    PATH=/opt/ci-evals/bin:$PATH
COPY --from=build /usr/local/share/nltk_data /usr/local/share/nltk_data
COPY --from=build /opt/ci-evals /opt/ci-evals
WORKDIR /github/workspace
ENTRYPOINT ["ci-evals", "action"]
