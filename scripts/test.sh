#!/usr/bin/env bash
# Install orgate with its test dependencies into .venv, start what the tests need
# (a throwaway PostgreSQL), lint, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# Redis for the shared rate-limit tests; HAProxy, nginx and iproute2 for the multi-node tests
# (tests/cluster: nodes in network namespaces behind a load balancer); schemathesis (fuzzing)
# in its own venv, since its pinned jsonschema-rs conflicts with orgate's. The packages'
# services are not started (policy-rc.d): the tests start what they need and stop it.
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v ip >/dev/null || [ -x /usr/sbin/ip ] || missing+=(iproute2)
if [ ${#missing[@]} -gt 0 ]; then
  no_start=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    no_start=1
  fi
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
  if [ -n "$no_start" ]; then rm -f /usr/sbin/policy-rc.d; fi
fi
bash scripts/chromium.sh  # Debian's chromium for tests/console (the browser tests)
[ -x .venv-fuzz/bin/schemathesis ] || { "$PY" -m venv .venv-fuzz && .venv-fuzz/bin/pip install -q schemathesis; }

# PostgreSQL for the store tests (installed from Debian packages if missing): a cluster of
# this run's own, stopped and removed when the run ends (unless ORGATE_PG_STATE_DIR names one).
if [ -x .ci/postgres.sh ] || [ -f .ci/postgres.sh ]; then
  if [ -z "${ORGATE_PG_STATE_DIR:-}" ]; then
    ORGATE_PG_STATE_DIR="$(mktemp -d /tmp/orgate-test-pg.XXXXXX)"
    export ORGATE_PG_STATE_DIR
    trap 'bash .ci/postgres.sh stop >/dev/null 2>&1 || true' EXIT
  fi
  eval "$(bash .ci/postgres.sh)"
  export ORGATE_TEST_PG_URL
fi

# A real language model for the real_model tier (tests/real_model/): scripts/real-model.sh,
# stopped when the run ends (after whatever the EXIT trap already does).
ORGATE_REAL_MODEL_STATE_DIR="${ORGATE_REAL_MODEL_STATE_DIR:-$(mktemp -d /tmp/orgate-test-model.XXXXXX)}"
export ORGATE_REAL_MODEL_STATE_DIR
stop_model() { bash scripts/real-model.sh stop >/dev/null 2>&1 || true; }
trap "stop_model; $(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT\$//")" EXIT
model_env="$(bash scripts/real-model.sh)"
eval "$model_env"

.venv/bin/ruff check src tests bench scripts examples
.venv/bin/ruff format --check src tests bench scripts examples
.venv/bin/lint-imports
.venv/bin/mypy  # strict, over src/orgate ([tool.mypy] in pyproject.toml)

# orgate installed exactly as the README says (fresh venv, no extras), smoke-tested from outside.
bash scripts/install-smoke.sh
# LlamaIndex pins openai<3: its black-box tests run in their own virtualenv.
bash scripts/llamaindex-tests.sh

# The container image (Dockerfile), built and run with podman: scripts/container.sh.
bash scripts/container.sh

# The suite last, so that its summary is the run's closing line.
.venv/bin/python -m pytest -q -n 2 "$@"
