"""Fixtures of the JavaScript SDK black-box tests: ``npm ci`` once, three "smart" fake upstreams,
one ``orgate serve`` in front of them and the built-in model, and a runner for the node scripts.

The fakes answer like a tiny model, from the request alone (so a node script can make a whole
conversation without the test scripting each turn):

- the last input is a tool result → text ``The tool said: <output>``;
- function tools are offered (and ``tool_choice`` is not ``none``) → a call of the first tool (of
  every tool when the last user text contains ``parallel``) with arguments generated from its
  JSON Schema;
- a JSON schema format is asked for (in the system prompt, or as Anthropic's structured
  outputs ``output_config``) → a JSON value generated from the schema;
- the last user text contains ``think`` → reasoning (a summary, thinking) before the answer or
  the call;
- otherwise → ``You said: <last user text>``.

The chat fake answers ``fake:429`` in the last user text with a 429 (``Retry-After: 1``).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from orgate.providers.schema_example import example_for
from tests.fakes import anthropic_upstream as anth
from tests.fakes import openai_chat_upstream as chat
from tests.fakes import responses_upstream as resp
from tests.fakes._base import LoopbackFake
from tests.hardening.conftest import server_env
from tests.server_process import OrgateServer
from tests.support.upstreams import provider_models, thinking_models, three_fakes

JS_DIR = Path(__file__).resolve().parents[1] / "js"
NODE = shutil.which("node")
NPM = shutil.which("npm")
SCHEMA_MARK = re.compile(r"JSON Schema:\n")
LIMIT = 16  # a token limit at or below this truncates the fakes' answers (one word per token)

# --------------------------------------------------------------------------- the fakes' brains


def _json_text(schema: Any, seed: str) -> str:
    return json.dumps(example_for(schema or {"type": "object"}, seed))


def _truncated(said: str, limit: Any) -> str | None:
    """The answer cut to ``limit`` words when the request's token limit is small, else None."""
    if not isinstance(limit, int) or limit > LIMIT:
        return None
    return " ".join(f"You said: {said}".split()[:limit])


def _chat_brain(body: dict[str, Any]) -> chat.Script:
    last = body["messages"][-1]
    said = chat.last_user_text(body)
    if "fake:429" in said:
        return chat.rate_limited("1")
    if last.get("role") == "tool":
        return chat.text(f"The tool said: {last.get('content')}")
    tools = body.get("tools") or []
    if tools and body.get("tool_choice") != "none":
        thought = "Let me think about it." if "think" in said else None
        fns = [t["function"] for t in tools[: len(tools) if "parallel" in said else 1]]
        return chat.tool_calls(
            *((fn["name"], _json_text(fn.get("parameters"), said)) for fn in fns), reasoning=thought
        )
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return chat.text(_json_text(fmt["json_schema"].get("schema"), said))
    cut = _truncated(said, body.get("max_completion_tokens") or body.get("max_tokens"))
    if cut is not None:
        return chat.text(cut, finish_reason="length")
    if "think" in said:
        return chat.Script(content=f"You said: {said}", reasoning="Let me think about it.")
    return chat.text(f"You said: {said}")


def _anthropic_brain(body: dict[str, Any]) -> anth.Script:
    last = body["messages"][-1]
    said = anth.last_user_text(body)
    blocks = last.get("content") if isinstance(last.get("content"), list) else []
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        content = results[-1].get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content)
        return anth.text(f"The tool said: {content}")
    structured = ((body.get("output_config") or {}).get("format") or {}).get("schema")
    if structured is not None:  # structured outputs: an answer valid against the schema
        return anth.text(_json_text(structured, said))
    tools = body.get("tools") or []
    if tools and (body.get("tool_choice") or {}).get("type") != "none":
        thought = "Let me think about it." if "think" in said else None
        calls = [
            (t["name"], _json_text(t.get("input_schema"), said))
            for t in tools[: len(tools) if "parallel" in said else 1]
        ]
        return anth.tool_use(*calls, thinking=thought)
    system = body.get("system")
    system = (
        " ".join(b.get("text", "") for b in system)
        if isinstance(system, list)
        else str(system or "")
    )
    mark = SCHEMA_MARK.search(system)
    if mark:
        schema, _ = json.JSONDecoder().raw_decode(system[mark.end() :])
        return anth.text(_json_text(schema, said))
    cut = _truncated(said, body.get("max_tokens"))
    if cut is not None:
        return anth.text(cut, stop_reason="max_tokens")
    if "think" in said:
        return anth.thinking("Let me think about it.", f"You said: {said}")
    return anth.text(f"You said: {said}")


def _responses_brain(body: dict[str, Any]) -> resp.Script:
    items = body.get("input")
    said = resp.last_user_text(body)
    last = items[-1] if isinstance(items, list) and items else {}
    if last.get("type") == "function_call_output":
        return resp.text(f"The tool said: {last.get('output')}")
    tools = [t for t in body.get("tools") or [] if t.get("type") == "function"]
    if tools and body.get("tool_choice") != "none":
        calls = [
            (t["name"], _json_text(t.get("parameters"), said))
            for t in tools[: len(tools) if "parallel" in said else 1]
        ]
        if "think" in said:
            return resp.function_calls(
                *calls,
                reasoning_summary="Let me think about it.",
                encrypted_content="gAAAAABfake-encrypted",
                reasoning_tokens=7,
            )
        return resp.function_calls(*calls)
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_schema":
        return resp.text(_json_text(fmt.get("schema"), said))
    cut = _truncated(said, body.get("max_output_tokens"))
    if cut is not None:
        return resp.text(cut, outcome="incomplete")
    if "think" in said:
        return resp.reasoning("Let me think about it.", f"You said: {said}", reasoning_tokens=7)
    return resp.text(f"You said: {said}")


BRAINS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "chat": _chat_brain,
    "anth": _anthropic_brain,
    "resp": _responses_brain,
}

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def node_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tests/js/node_modules``, installed with ``npm ci`` once (a file lock keeps xdist workers
    from racing; the second one finds the tree the first one installed)."""
    if NODE is None:
        pytest.skip("node is not installed")
    target = JS_DIR / "node_modules"
    marker = target / ".orgate-npm-ci-done"
    with (JS_DIR / ".npm-ci.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not marker.exists():
                if NPM is None:
                    pytest.fail("tests/js/node_modules is missing and npm is not installed")
                done = subprocess.run(
                    [NPM, "ci", "--no-audit", "--no-fund"],
                    cwd=JS_DIR,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                if done.returncode != 0:
                    pytest.fail(f"npm ci failed in {JS_DIR}:\n{done.stdout}\n{done.stderr}")
                marker.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return target


@pytest.fixture(scope="module")
def fakes() -> Iterator[dict[str, LoopbackFake]]:
    with three_fakes() as running:
        for name, fake in running.items():
            fake.handler = BRAINS[name]
        yield running


@pytest.fixture(scope="module")
def server(fakes: dict[str, LoopbackFake]) -> Iterator[OrgateServer]:
    config = (
        "[endpoints]\nchat_completions = { enabled = true }\n"
        + provider_models(fakes, api_key="k", read_timeout=10)
        + thinking_models(fakes, api_key="k", read_timeout=10)
    )
    with OrgateServer(config, env=server_env()) as running:
        yield running


@pytest.fixture(scope="module")
def openai_names_server(fakes: dict[str, LoopbackFake]) -> Iterator[OrgateServer]:
    """A server with ``[endpoints.responses] event_names = "openai"`` and the reasoning models."""
    config = thinking_models(fakes, api_key="k", read_timeout=10)
    with OrgateServer(
        config, env={**server_env(), "ORGATE_ENDPOINTS__RESPONSES__EVENT_NAMES": "openai"}
    ) as running:
        yield running


@pytest.fixture
def run_js(node_modules: Path, server: OrgateServer) -> Callable[..., Any]:
    """``run_js("script.mjs", MODEL="chat")``: run a node script of ``tests/js`` against the server
    (``ORGATE_BASE_URL``, ``ORGATE_API_KEY``, then the keyword arguments in the environment) and
    return the JSON it printed; a non-zero exit fails the test with its output."""
    return _runner(server)


@pytest.fixture
def run_js_openai_names(
    node_modules: Path, openai_names_server: OrgateServer
) -> Callable[..., Any]:
    """``run_js`` against ``openai_names_server``."""
    return _runner(openai_names_server)


def _runner(server: OrgateServer) -> Callable[..., Any]:
    """The node-script runner of ``run_js`` for ``server``."""

    def run(script: str, timeout: float = 30, **env: str) -> Any:
        full = {
            **os.environ,
            "ORGATE_BASE_URL": server.base_url,
            "ORGATE_API_KEY": server.api_key,
            **env,
        }
        done = subprocess.run(
            [NODE or "node", script],
            cwd=JS_DIR,
            env=full,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            pytest.fail(
                f"node {script} {env} exited with "
                f"{done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
            )
        return json.loads(done.stdout)

    return run
