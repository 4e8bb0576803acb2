#!/usr/bin/env bash
# A real Letta 0.16.8 REST server on 127.0.0.1 for the real-server tests (pytest -m letta_server).
#
#   scripts/letta-server.sh start    # build what is missing, start, print the base URL and handles
#   scripts/letta-server.sh stop     # stop exactly the processes start started (by PID)
#   scripts/letta-server.sh status   # running or not (exit 0 / 1), with the URL
#   scripts/letta-server.sh env      # `export LETTA_BASE_URL=...` lines for eval
#
# Built from the package registry only: a venv with letta[server]==0.16.8 and pydantic<2.12 (the
# server's own: it needs openai<3, ci-evals' venv does not), Postgres 16 + pgvector from the
# pgserver wheel, the alembic migrations from the letta 0.16.8 sdist (the wheel has none). The LLM
# of every agent is tests/fakes/letta_llm.py (stdlib). Everything lives in
# ${CI_EVALS_LETTA_HOME:-~/.cache/ci-evals-letta} (venv/ 1.2 GB, reused; src/, logs/, run/); the
# Postgres data in pg/ there, or in ${TMPDIR:-/tmp}/ci-evals-letta-pg when run as root (Postgres
# runs as the user "postgres", which cannot enter root's home). Safe to run twice: a second start
# finds the running server and prints it again.
# Redis (Debian's redis-server, apt-get installed when missing; no persistence) backs the server's
# background streaming, which Letta Code needs; the fake LLM streams (SSE) when asked to.
# Ports: CI_EVALS_LETTA_PORT (8283), CI_EVALS_LETTA_PG_PORT (54329), CI_EVALS_LETTA_LLM_PORT (18999),
# CI_EVALS_LETTA_REDIS_PORT (56379). A second server beside the first (.ci/run runs two, so that the
# real-server tests, which stop and restart theirs, and the oracle tests run at once) takes other
# ports, another CI_EVALS_LETTA_HOME, its own Postgres folder (CI_EVALS_LETTA_PG) and the first
# one's venv (CI_EVALS_LETTA_VENV, default HOME/venv; start the first one first: it builds it).
# Nothing leaves 127.0.0.1 at run time: the servers get an empty environment, proxies aimed at a
# closed loopback port, NLTK's index on loopback, and no key but the fake LLM's.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
W=${CI_EVALS_LETTA_HOME:-$HOME/.cache/ci-evals-letta}
VENV=${CI_EVALS_LETTA_VENV:-$W/venv}
RUN=$W/run
LOGS=$W/logs
PORT=${CI_EVALS_LETTA_PORT:-8283}
PGPORT=${CI_EVALS_LETTA_PG_PORT:-54329}
LLMPORT=${CI_EVALS_LETTA_LLM_PORT:-18999}
REDISPORT=${CI_EVALS_LETTA_REDIS_PORT:-56379}
if [[ -n ${CI_EVALS_LETTA_PG:-} ]]; then PG=$CI_EVALS_LETTA_PG
elif [[ $EUID -eq 0 ]]; then PG=${TMPDIR:-/tmp}/ci-evals-letta-pg; else PG=$W/pg; fi
PGDATA=$PG/data
PGSOCK=$PG/sock
TAG=0.16.8
PKGS=("letta[server]==$TAG" "pydantic<2.12" asyncpg pgvector pg8000 psycopg2-binary pgserver alembic redis)
HANDLES="openai-proxy/gpt-4o-mini openai-proxy/gpt-4.1-mini"
EMBED_HANDLE=openai/text-embedding-3-small
CLOSED=http://127.0.0.1:9  # proxy for everything not on loopback: nothing listens there

say() { printf '[letta-server %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

pick_python() {
  local c
  for c in ${CI_EVALS_LETTA_PYTHON:-} python3.11 python3.12 python3.13 python3; do
    command -v "$c" >/dev/null 2>&1 || continue
    if "$c" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 14))' 2>/dev/null
    then echo "$c"; return 0; fi
  done
  return 1
}

venv_ok() {
  [[ -x $VENV/bin/python && -x $VENV/bin/letta && -x $VENV/bin/alembic ]] || return 1
  "$VENV/bin/python" - <<'EOF' 2>/dev/null
import importlib.metadata as m, importlib.util as u
assert m.version("letta") == "0.16.8"
assert tuple(int(x) for x in m.version("pydantic").split(".")[:2]) < (2, 12)
for mod in ("asyncpg", "pgvector", "pg8000", "psycopg2", "pgserver", "alembic", "redis"):
    assert u.find_spec(mod), mod
EOF
}

ensure_venv() {
  if venv_ok; then return 0; fi
  local py t=$SECONDS
  py=$(pick_python) || die "needs Python 3.11, 3.12 or 3.13 (set CI_EVALS_LETTA_PYTHON)"
  "$VENV/bin/python" -c '' 2>/dev/null || { rm -rf "$VENV"; "$py" -m venv "$VENV"; }
  say "installing letta $TAG into $VENV (about 3 minutes, 1.2 GB; log: $LOGS/pip.log)"
  # --no-compile: pip would compile all 19,500 modules; the server compiles the ones it imports.
  { "$VENV/bin/pip" install --upgrade pip && "$VENV/bin/pip" install --no-compile "${PKGS[@]}"; } \
    >"$LOGS/pip.log" 2>&1 || die "pip install failed: see $LOGS/pip.log"
  venv_ok || die "the venv is still incomplete after pip install: see $LOGS/pip.log"
  say "venv built in $((SECONDS - t)) s"
}

ensure_src() {  # alembic/ and alembic.ini of 0.16.8 from its sdist on the package registry
  [[ -f $W/src/alembic.ini && -d $W/src/alembic && $(cat "$W/src/.tag" 2>/dev/null) == "$TAG" ]] && return 0
  rm -rf "$W/src.new" "$W/sdist" && mkdir -p "$W/src.new" "$W/sdist"
  "$VENV/bin/pip" download -q --no-deps --no-binary :all: "letta==$TAG" -d "$W/sdist" \
    >"$LOGS/sdist.log" 2>&1 || die "pip download of the letta $TAG sdist failed: see $LOGS/sdist.log"
  tar -xzf "$W/sdist/letta-$TAG.tar.gz" -C "$W/src.new" --strip-components=1 \
    "letta-$TAG/alembic" "letta-$TAG/alembic.ini" || die "the letta $TAG sdist has no alembic/"
  echo "$TAG" >"$W/src.new/.tag"
  rm -rf "$W/src" "$W/sdist" && mv "$W/src.new" "$W/src"
  say "alembic/ and alembic.ini extracted from the letta $TAG sdist"
}

pidfile() { echo "$RUN/$1.pid"; }
pattern() { case $1 in postgres) echo "$PGDATA" ;; llm) echo "letta_llm" ;; letta) echo "letta server" ;; redis) echo "redis-server" ;; esac; }
pid_of() {  # the recorded PID, if that process is alive and still the one we started
  local f=$RUN/$1.pid pid
  [[ -f $f ]] || return 1
  pid=$(cat "$f")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$(pattern "$1")" || return 1
  echo "$pid"
}
launch() {  # NAME LOG CMD...: detached in its own session; the PID file holds CMD's PID
  local name=$1 log=$2 f
  shift 2
  f=$(pidfile "$name")
  rm -f "$f"
  setsid bash -c 'cd "$1" && echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && shift && exec "$@"' \
    "$f" "$W/home" "$@" </dev/null >>"$log" 2>&1 &
  for _ in $(seq 50); do [[ -s $f ]] && return 0; sleep 0.1; done
  die "$name did not start"
}
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
http_ok() { curl -sf --noproxy '*' -m 3 -o /dev/null "$1"; }
wait_for() {  # NAME SECONDS CHECK...: until CHECK succeeds, while NAME is alive
  local name=$1 secs=$2 i f
  shift 2
  f=$(pidfile "$name")
  for ((i = 0; i < secs * 4; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    # Alive is enough here: the process was just launched, and its /proc cmdline (pid_of's check)
    # can read empty while it is in execve (redis was once given up on 0.1 s after it started).
    [[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null || return 1
    sleep 0.25
  done
  return 1
}
running() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $st != Z* ]]; }
stop_one() {  # NAME SIGNAL SECONDS: the recorded PID, then what is left of its session
  local name=$1 sig=$2 secs=$3 pid i p left
  if ! pid=$(pid_of "$name"); then rm -f "$(pidfile "$name")"; return 0; fi
  kill -"$sig" "$pid" 2>/dev/null || true
  for ((i = 0; i < secs * 10; i++)); do running "$pid" || break; sleep 0.1; done
  if running "$pid"; then say "$name ($pid) ignored SIG$sig: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; fi
  left=$(ps -eo pid=,pgid= | awk -v g="$pid" '$2 == g && $1 != g {print $1}')
  for p in $left; do kill -TERM "$p" 2>/dev/null || true; done
  [[ -z $left ]] || sleep 1
  for p in $left; do if running "$p"; then kill -KILL "$p" 2>/dev/null || true; fi; done
  rm -f "$(pidfile "$name")"
  say "stopped $name ($pid)"
}
cmd_stop() {
  mkdir -p "$RUN"
  stop_one letta TERM 20
  stop_one llm TERM 5
  stop_one redis TERM 10
  stop_one postgres INT 60  # fast shutdown: clean, keeps the data for the next start
}

server_env() {  # the only environment the Letta processes get
  mkdir -p "$W/pyhooks"
  # Lazily: Letta runs each tool in a subprocess that inherits PYTHONPATH, and importing NLTK (or
  # the letta package's __init__, below) there would cost seconds of CPU per tool call.
  cat >"$W/pyhooks/sitecustomize.py" <<'EOF'
# written by letta-server.sh: when nltk.downloader is imported, its index URL is on loopback
import importlib.machinery
import sys


class _NltkOnLoopback:
    def find_spec(self, name, path=None, target=None):
        if name != "nltk.downloader":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            url = "http://127.0.0.1:9/nltk_data/index.xml"
            module.Downloader.DEFAULT_URL = module._downloader._url = url

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _NltkOnLoopback())


def _letta_package_on_first_use():
    """In a tool's subprocess only: `letta` without running its __init__ until it is used.

    Letta runs each tool call as a script in a fresh Python that imports
    letta.functions.ast_parsers to coerce the arguments; letta/__init__.py imports most of the
    server (5-10 CPU-s a tool call). The package's own attributes (`from letta import *`, which a
    tool taking agent_state gets) still run it, the first time one is read; submodules import as
    before, so the tool and its arguments are exactly what they were.
    """
    import importlib.util

    spec = importlib.util.find_spec("letta")
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return
    module = importlib.util.module_from_spec(spec)

    def __getattr__(name):
        del module.__dict__["__getattr__"]
        spec.loader.exec_module(module)
        return getattr(module, name)

    module.__getattr__ = __getattr__
    sys.modules["letta"] = module


if "/tool_execution_dir/" in (sys.argv[0] if sys.argv else ""):
    _letta_package_on_first_use()
EOF
  ENVV=(env -i PATH="$VENV/bin:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8 LC_ALL=C.UTF-8
        TMPDIR="${TMPDIR:-/tmp}" HOME="$W/home" LETTA_DIR="$W/home/.letta"
        LETTA_PG_URI="postgresql://letta@127.0.0.1:$PGPORT/letta"
        OPENAI_API_KEY=sk-fake-letta-llm OPENAI_BASE_URL="http://127.0.0.1:$LLMPORT/v1"
        HTTP_PROXY=$CLOSED HTTPS_PROXY=$CLOSED ALL_PROXY=$CLOSED
        http_proxy=$CLOSED https_proxy=$CLOSED all_proxy=$CLOSED
        NO_PROXY=127.0.0.1,localhost,::1 no_proxy=127.0.0.1,localhost,::1
        NLTK_DATA="$W/home/nltk_data" TIKTOKEN_CACHE_DIR="$W/home/tiktoken"
        HF_HUB_OFFLINE=1 ORT_DISABLE_TELEMETRY=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1
        PYTHONPATH="$W/pyhooks" LETTA_REDIS_HOST=127.0.0.1 LETTA_REDIS_PORT="$REDISPORT")
}

ensure_postgres() {
  local pgbin pginst
  pginst=$("$VENV/bin/python" -c 'import importlib.util as u, os
print(os.path.join(os.path.dirname(u.find_spec("pgserver").origin), "pginstall"))')
  [[ -x $pginst/bin/postgres ]] || die "no postgres binary in the pgserver wheel ($pginst)"
  AS_PG=()
  mkdir -p "$PGSOCK" "$PGDATA"
  pgbin=$pginst/bin
  if [[ $EUID -eq 0 ]]; then  # the user postgres cannot read root's home: a copy beside the data
    local copy=$PG/bin/pgserver/pginstall  # its RPATH is $ORIGIN/../../../pgserver.libs
    if ! cmp -s "$pginst/bin/postgres" "$copy/bin/postgres"; then
      rm -rf "$PG/bin" && mkdir -p "$PG/bin/pgserver"
      cp -a "$pginst" "$copy" && cp -a "$pginst/../../pgserver.libs" "$PG/bin/pgserver.libs"
    fi
    pgbin=$copy/bin
  fi
  if [[ $EUID -eq 0 ]]; then  # initdb and postgres refuse to run as root
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    AS_PG=(setpriv --reuid="$(id -u postgres)" --regid="$(id -g postgres)" --init-groups --)
    chown postgres "$PG" "$PGDATA" "$PGSOCK"
  fi
  chmod 700 "$PGDATA"
  "${AS_PG[@]}" test -w "$PGDATA" -a -w "$PGSOCK" || die "the Postgres user cannot write $PGDATA"
  if [[ ! -f $PGDATA/PG_VERSION ]]; then
    say "initdb $PGDATA"
    "${AS_PG[@]}" "$pgbin/initdb" -D "$PGDATA" -U letta -A trust -E UTF8 --no-locale --no-sync \
      >"$LOGS/initdb.log" 2>&1 || die "initdb failed: see $LOGS/initdb.log"
  fi
  if ! pid_of postgres >/dev/null; then
    port_busy "$PGPORT" && die "port $PGPORT is taken by a process this script did not start (set CI_EVALS_LETTA_PG_PORT)"
    launch postgres "$LOGS/postgres.log" "${AS_PG[@]}" "$pgbin/postgres" -D "$PGDATA" \
      -p "$PGPORT" -k "$PGSOCK" -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off
  fi
  wait_for postgres 60 "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$PGPORT" \
    || { tail -20 "$LOGS/postgres.log" >&2; die "postgres did not come up: see $LOGS/postgres.log"; }
  local psql=("$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U letta)
  if [[ $("${psql[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'letta'") != 1 ]]
  then "${psql[@]}" -d postgres -c 'CREATE DATABASE letta'; fi
  "${psql[@]}" -d letta -c 'SET client_min_messages = warning' -c 'CREATE EXTENSION IF NOT EXISTS vector'
  local cur  # the schema: migrated once per data folder (the head is recorded beside the data)
  cur=$("${psql[@]}" -d letta -tAc 'SELECT version_num FROM alembic_version' 2>/dev/null || true)
  if [[ -n $cur && $cur == "$(cat "$PG/alembic-head" 2>/dev/null)" ]]; then return 0; fi
  say "alembic upgrade head (log: $LOGS/alembic.log)"
  (cd "$W/src" && "${ENVV[@]}" "$VENV/bin/alembic" upgrade head) >"$LOGS/alembic.log" 2>&1 \
    || { tail -20 "$LOGS/alembic.log" >&2; die "alembic upgrade failed: see $LOGS/alembic.log"; }
  "${psql[@]}" -d letta -tAc 'SELECT version_num FROM alembic_version' >"$PG/alembic-head"
}

ensure_redis() {  # Debian's redis-server on loopback, no persistence, PID-tracked like the rest
  local rs
  if ! rs=$(command -v redis-server); then
    say "installing redis-server (apt-get; log: $LOGS/apt.log)"
    local sudo=()
    [[ $EUID -eq 0 ]] || sudo=(sudo)
    { "${sudo[@]}" apt-get update && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y redis-server; } \
      >"$LOGS/apt.log" 2>&1 || die "apt-get install redis-server failed: see $LOGS/apt.log"
    rs=$(command -v redis-server) || die "no redis-server after apt-get install"
  fi
  if ! pid_of redis >/dev/null; then
    port_busy "$REDISPORT" && die "port $REDISPORT is taken by a process this script did not start (set CI_EVALS_LETTA_REDIS_PORT)"
    launch redis "$LOGS/redis.log" "$rs" --port "$REDISPORT" --bind 127.0.0.1 --daemonize no \
      --save '' --appendonly no --dir "$W/home"
  fi
  wait_for redis 20 port_busy "$REDISPORT" || { tail -20 "$LOGS/redis.log" >&2; die "redis did not come up: see $LOGS/redis.log"; }
}

env_lines() {
  cat <<EOF
export LETTA_BASE_URL=http://127.0.0.1:$PORT
export LETTA_TEST_MODEL=${HANDLES%% *}
export LETTA_TEST_MODELS="$HANDLES"
export LETTA_TEST_EMBEDDING=$EMBED_HANDLE
export LETTA_TEST_LLM_URL=http://127.0.0.1:$LLMPORT
export LETTA_CODE_MODEL=${HANDLES%% *}
EOF
}

print_info() {
  cat <<EOF
Letta $TAG server is up (any API key is accepted):
  LETTA_BASE_URL=http://127.0.0.1:$PORT
  model handles:    $HANDLES
  embedding handle: $EMBED_HANDLE
  LLM (fake):       http://127.0.0.1:$LLMPORT/v1 (GET /stats for its counters; streams when asked)
  Redis:            127.0.0.1:$REDISPORT
  logs: $LOGS    environment: eval "\$($0 env)"    stop: $0 stop
EOF
}

cmd_status() {
  if pid_of letta >/dev/null && http_ok "http://127.0.0.1:$PORT/v1/health/"; then
    echo "running: http://127.0.0.1:$PORT (letta $(pid_of letta), llm $(pid_of llm || echo -), redis $(pid_of redis || echo -), postgres $(pid_of postgres || echo -))"
    return 0
  fi
  echo "not running"
  return 1
}

cmd_start() {
  local t0=$SECONDS
  mkdir -p "$W" "$RUN" "$LOGS" "$W/home"
  if pid_of letta >/dev/null && http_ok "http://127.0.0.1:$PORT/v1/health/"; then
    say "already running"; print_info; return 0
  fi
  STARTED=0
  trap '[[ $STARTED == 1 ]] || { say "start failed: stopping what it started"; cmd_stop; }' EXIT
  ensure_venv
  ensure_src
  server_env
  ensure_postgres
  ensure_redis
  if ! pid_of llm >/dev/null; then
    port_busy "$LLMPORT" && die "port $LLMPORT is taken by a process this script did not start (set CI_EVALS_LETTA_LLM_PORT)"
    launch llm "$LOGS/llm.log" env PYTHONPATH="$REPO" "$VENV/bin/python" -m tests.fakes.letta_llm "$LLMPORT"
    wait_for llm 10 http_ok "http://127.0.0.1:$LLMPORT/v1/models" || die "the fake LLM did not come up"
  fi
  if pid_of letta >/dev/null; then stop_one letta TERM 20; fi
  port_busy "$PORT" && die "port $PORT is taken by a process this script did not start (set CI_EVALS_LETTA_PORT)"
  say "starting letta server on 127.0.0.1:$PORT (log: $LOGS/letta.log)"
  : >"$LOGS/letta.log"
  local t1=$SECONDS handles h
  launch letta "$LOGS/letta.log" "${ENVV[@]}" "$VENV/bin/letta" server --host 127.0.0.1 --port "$PORT"
  wait_for letta 300 http_ok "http://127.0.0.1:$PORT/v1/health/" \
    || { tail -30 "$LOGS/letta.log" >&2; die "letta server did not answer /v1/health/: see $LOGS/letta.log"; }
  handles=$(curl -sf --noproxy '*' -m 30 "http://127.0.0.1:$PORT/v1/models/" \
            | "$VENV/bin/python" -c 'import json,sys; print(" ".join(m["handle"] for m in json.load(sys.stdin)))') \
    || die "could not list the server's models"
  for h in $HANDLES; do [[ " $handles " == *" $h "* ]] || die "model $h not listed (got: $handles)"; done
  STARTED=1
  say "letta answered after $((SECONDS - t1)) s; start took $((SECONDS - t0)) s in all"
  print_info
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) env_lines ;;
  *) sed -n '4,7p' "$0" | sed 's/^# *//' >&2; exit 2 ;;
esac
