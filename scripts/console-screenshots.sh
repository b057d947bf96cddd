#!/usr/bin/env bash
# The screenshots of docs/console.md, made by the console's browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/chromium.sh
ORGATE_CONSOLE_SCREENSHOTS=docs/console .venv/bin/python -m pytest -q -p no:cacheprovider tests/console "$@"
