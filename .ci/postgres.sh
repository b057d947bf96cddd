#!/usr/bin/env bash
# Start (or reuse) a throwaway PostgreSQL cluster for orgate's tests.
#
# Usage:  eval "$(.ci/postgres.sh)"      # exports ORGATE_TEST_PG_URL
#         .ci/postgres.sh stop           # stop the cluster and remove its data
#
# Installs PostgreSQL from Debian packages when no server binary is found,
# runs initdb/postgres as the unprivileged `postgres` user (they refuse root),
# in a temp directory, on a free local port. Idempotent: a second call finds the
# running cluster through its state file and only prints the URL again.
# Diagnostics go to stderr; stdout carries only the `export` line.
#
# ORGATE_PG_LISTEN (addresses, comma-separated) makes a fresh cluster listen there too, and
# ORGATE_PG_ALLOW (a network, e.g. 10.213.7.0/24) lets its clients in with the password: for
# servers in network namespaces (tests/cluster), which cannot reach 127.0.0.1.
set -euo pipefail

STATE_DIR="${ORGATE_PG_STATE_DIR:-/tmp/orgate-ci-postgres}"
DB_NAME="orgate_test"
DB_USER="orgate"
DB_PASS="orgate"

log() { echo "postgres.sh: $*" >&2; }

find_bindir() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then echo "$d"; return 0; fi
    done
    return 1
}

as_pg() {
    if [[ "$(id -u)" == "0" ]]; then
        if command -v runuser >/dev/null; then runuser -u postgres -- "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
    else
        "$@"
    fi
}

BINDIR="$(find_bindir || true)"
if [[ "${1:-}" == "stop" ]]; then
    if [[ -n "$BINDIR" && -f "$STATE_DIR/data/PG_VERSION" ]]; then
        as_pg "$BINDIR/pg_ctl" -D "$STATE_DIR/data" -m immediate stop >&2 || true
    fi
    rm -rf "$STATE_DIR"
    exit 0
fi

if [[ -z "$BINDIR" ]]; then
    log "installing PostgreSQL from Debian packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y --no-install-recommends postgresql >&2
    BINDIR="$(find_bindir)"
fi

if [[ "$(id -u)" == "0" ]] && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir "$STATE_DIR" --shell /bin/sh postgres
fi

url_for() { echo "postgresql://$DB_USER:$DB_PASS@127.0.0.1:$1/$DB_NAME"; }

# Already running?
if [[ -f "$STATE_DIR/port" ]] && as_pg "$BINDIR/pg_ctl" -D "$STATE_DIR/data" status >/dev/null 2>&1; then
    PORT="$(cat "$STATE_DIR/port")"
    if "$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
        echo "export ORGATE_TEST_PG_URL=$(url_for "$PORT")"
        exit 0
    fi
fi

# Fresh cluster.
if [[ -f "$STATE_DIR/data/PG_VERSION" ]]; then
    as_pg "$BINDIR/pg_ctl" -D "$STATE_DIR/data" -m immediate stop >/dev/null 2>&1 || true
fi
rm -rf "$STATE_DIR"
mkdir -p "$STATE_DIR"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
echo "$PORT" > "$STATE_DIR/port"
[[ "$(id -u)" == "0" ]] && chown -R postgres "$STATE_DIR"

PWFILE="$STATE_DIR/pw"
echo "postgres" > "$PWFILE"
[[ "$(id -u)" == "0" ]] && chown postgres "$PWFILE"
as_pg "$BINDIR/initdb" -D "$STATE_DIR/data" -U postgres --pwfile="$PWFILE" -A scram-sha-256 \
    --auth-local=trust -E UTF8 --no-sync >/dev/null
cat >> "$STATE_DIR/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1${ORGATE_PG_LISTEN:+,$ORGATE_PG_LISTEN}'
port = $PORT
unix_socket_directories = '$STATE_DIR'
max_connections = 300
fsync = off                 # a throwaway test cluster: speed over crash safety
synchronous_commit = off
full_page_writes = off
shared_buffers = 128MB
CONF
if [[ -n "${ORGATE_PG_ALLOW:-}" ]]; then
    echo "host all all $ORGATE_PG_ALLOW scram-sha-256" >> "$STATE_DIR/data/pg_hba.conf"
fi
as_pg "$BINDIR/pg_ctl" -D "$STATE_DIR/data" -l "$STATE_DIR/log" -w -t 60 start >&2
as_pg "$BINDIR/psql" -h "$STATE_DIR" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -q >&2 <<SQL
CREATE ROLE $DB_USER LOGIN PASSWORD '$DB_PASS' CREATEDB;
CREATE DATABASE $DB_NAME OWNER $DB_USER;
SQL
log "PostgreSQL $("$BINDIR/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT (data in $STATE_DIR)"
echo "export ORGATE_TEST_PG_URL=$(url_for "$PORT")"
