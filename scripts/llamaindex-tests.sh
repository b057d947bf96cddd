#!/usr/bin/env bash
# LlamaIndex's OpenAIResponses against orgate (tests/frameworks/test_blackbox_llamaindex.py), in
# its own virtualenv: llama-index-llms-openai pins openai<3, which the Agents SDK of the test
# extra cannot use. The virtualenv is kept between runs (created when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv-llamaindex/bin/python ] || "$PY" -m venv .venv-llamaindex
.venv-llamaindex/bin/pip install -q -e . pytest pytest-asyncio pytest-timeout httpx aiohttp "llama-index-llms-openai>=0.8"
.venv-llamaindex/bin/python -m pytest -q -p no:cacheprovider tests/frameworks/test_blackbox_llamaindex.py
