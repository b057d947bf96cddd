#!/usr/bin/env bash
# Install orgate exactly as the README says (a fresh virtualenv, `pip install -e .`, no extras)
# and smoke-test it from outside with scripts/install_smoke.py, run by the test virtualenv's
# Python (the client side: the openai SDK, websockets).
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENT_PY=${CLIENT_PY:-.venv/bin/python}
PY=${PYTHON:-python3}
venv=$(mktemp -d "${TMPDIR:-/tmp}/orgate-install-venv.XXXXXX")
trap 'rm -rf "$venv"' EXIT
"$PY" -m venv "$venv/.venv" && "$venv/.venv/bin/pip" install -q -e . >/dev/null
"$CLIENT_PY" scripts/install_smoke.py "$venv/.venv/bin/orgate"
