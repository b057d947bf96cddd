"""The Codex CLI (``@openai/codex`` from npm, pinned in tests/codex_cli/npm) against a real
``orgate serve``, configured the way its documentation says for a custom provider — a
``config.toml`` in ``CODEX_HOME`` with a model provider whose ``base_url`` is orgate and whose
``wire_api`` is ``responses`` — and nothing else: no ``-c`` overrides, no feature flags.

Codex sends what OpenAI accepts and the spec does not have (``client_metadata``, ``web_search``
and ``namespace`` tools, ``reasoning.summary`` to every model) on every request, with the whole
history (``store: false``). The scenarios run through the built-in model and through an
``openai-chat`` upstream (a fake), over HTTP SSE and over Codex's WebSocket transport
(``supports_websockets`` on the provider). Shell commands run in Codex's ``read-only`` sandbox
(its default for ``codex exec``), which works here as root. Under model names Codex knows as
OpenAI's (``gpt-5.5``…) it also sends its ``custom`` ``apply_patch`` tool and ``reasoning.effort``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.fakes.openai_chat_upstream import FakeOpenAIChat, text, tool_calls
from tests.server_process import OrgateServer
from tests.support.configs import model_block
from tests.support.spent_budget import CALLS_PER_REQUEST, MODEL, SpentBudget, spent_budget_gateway

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}

NPM_DIR = Path(__file__).resolve().parent / "npm"
PATCH_START = "*** Begin Patch"
PATCH = f"{PATCH_START}\n*** Add File: hello.txt\n+hello from a patch\n*** End Patch\n"
NODE, NPM = shutil.which("node"), shutil.which("npm")
RUN_TIMEOUT = 300  # one `codex exec`: a few model calls, a sandboxed command


@pytest.fixture(scope="session")
def codex() -> Path:
    """The ``codex`` command, installed with ``npm ci`` once (a file lock keeps xdist workers
    from racing; the second finds the tree the first installed)."""
    if NODE is None:
        pytest.skip("node is not installed")
    marker = NPM_DIR / "node_modules" / ".orgate-npm-ci-done"
    with (NPM_DIR / ".npm-ci.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not marker.exists():
                if NPM is None:
                    pytest.fail(
                        "tests/codex_cli/npm/node_modules is missing and npm is not installed"
                    )
                done = subprocess.run(
                    [NPM, "ci", "--no-audit", "--no-fund"],
                    cwd=NPM_DIR,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                if done.returncode != 0:
                    pytest.fail(f"npm ci failed in {NPM_DIR}:\n{done.stdout}\n{done.stderr}")
                marker.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return NPM_DIR / "node_modules" / ".bin" / "codex"


def chat_brain(body: dict[str, Any]) -> Any:
    """The fake chat model: ``run: CMD`` calls ``exec_command`` with CMD; a patch (``*** Begin
    Patch`` …) calls ``apply_patch`` with it, as the function with one string argument that stands
    for Codex's custom tool; a tool's output is quoted; anything else is answered with one fixed
    sentence."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text(f"The command printed: {last['content']}")
    prompt = (
        last["content"]
        if isinstance(last["content"], str)
        else " ".join(p.get("text", "") for p in last["content"])
    )
    found = re.search(r"run: (.+)", prompt)
    if found:
        return tool_calls(("exec_command", json.dumps({"cmd": found.group(1).strip()})))
    if PATCH_START in prompt:
        return tool_calls(
            ("apply_patch", json.dumps({"input": prompt[prompt.index(PATCH_START) :]}))
        )
    return text("Hello from the chat upstream.")


@pytest.fixture(scope="module")
def chat() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat.start_in_thread() as fake:
        fake.handler = chat_brain
        yield fake


# Model names Codex knows as OpenAI's (its catalogue): for these it sends a ``custom`` tool
# (``apply_patch``, free-form input) and ``reasoning.effort``; for its newest (``gpt-6-sol``) every
# tool in an ``additional_tools`` input item. Served by the built-in model and by an
# ``openai-chat`` upstream that takes reasoning options.
OPENAI_NAMED = (
    model_block("gpt-5.5", "builtin", "", "echo")
    + model_block("gpt-6-sol", "builtin", "", "echo")
    + model_block(
        "gpt-5.5-mini",
        "openai-chat",
        "{chat}",
        "fake-model",
        read_timeout=30,
        extra="capabilities = { reasoning = true }",
    )
)


@pytest.fixture(scope="module")
def server(chat: FakeOpenAIChat) -> Iterator[OrgateServer]:
    config = model_block(
        "fake-chat", "openai-chat", chat.base_url, "fake-model", read_timeout=30
    ) + OPENAI_NAMED.replace("{chat}", chat.base_url)
    with OrgateServer(config) as running:
        yield running


class Codex:
    """One Codex home (``config.toml``), work directory (a git repository, so that Codex
    trusts it without a flag) and ``HOME``: an empty one, so that the login shell Codex runs
    commands in (``bash -lc``) starts the same on every machine, whatever the user's own
    profile does (and however long it takes)."""

    def __init__(
        self, binary: Path, server: OrgateServer, root: Path, model: str, *, websocket: bool = False
    ) -> None:
        self.binary, self.home, self.workdir = binary, root / "codex-home", root / "work"
        self.home.mkdir()
        self.workdir.mkdir()
        (root / "home").mkdir()
        subprocess.run(["git", "init", "-q", str(self.workdir)], check=True)
        provider = [
            "[model_providers.orgate]",
            'name = "orgate"',
            f'base_url = "{server.base_url}"',
            'wire_api = "responses"',
            'env_key = "ORGATE_API_KEY"',
        ]
        if websocket:
            provider.append("supports_websockets = true")
        config = [f'model = "{model}"', 'model_provider = "orgate"', "", *provider]
        (self.home / "config.toml").write_text("\n".join(config) + "\n")
        self.env = {
            **os.environ,
            "CODEX_HOME": str(self.home),
            "HOME": str(root / "home"),
            "ORGATE_API_KEY": server.api_key,
            "RUST_LOG": "codex_api=info",
        }
        self.stderr = ""
        self.returncode = 0

    def exec(self, *args: str, check: bool = True) -> list[dict[str, Any]]:
        """``codex exec --json ARGS``: its events, after checking it exited 0 (``check``)."""
        done = subprocess.run(
            [str(self.binary), "exec", "--json", *args],
            cwd=self.workdir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        self.stderr = done.stderr
        self.returncode = done.returncode
        assert done.returncode == 0 or not check, (
            f"codex exec exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def items(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        e["item"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == kind
    ]


def answer(events: list[dict[str, Any]]) -> str:
    messages = items(events, "agent_message")
    assert messages, events
    assert not [e for e in events if e["type"] in ("error", "turn.failed")], events
    return str(messages[-1]["text"])


def responses_requests(server: OrgateServer) -> float:
    """POST /v1/responses requests served so far (every status), from /metrics."""
    import httpx

    metrics = httpx.get(f"{server.url}/metrics", headers=server.headers(), timeout=30).text
    pattern = re.compile(
        r'^orgate_http_requests_total\{[^}]*method="POST"[^}]*route="/v1/responses"[^}]*\} (\S+)$',
        re.M,
    )
    return sum(float(v) for v in pattern.findall(metrics))


def test_a_shell_round_trip_through_the_builtin_model_in_the_read_only_sandbox(
    codex: Path, server: OrgateServer, tmp_path: Path
) -> None:
    cli = Codex(codex, server, tmp_path, "orgate/echo")
    events = cli.exec("echo codex-roundtrip")
    [command] = items(events, "command_execution")
    assert command["exit_code"] == 0 and "codex-roundtrip" in command["aggregated_output"]
    # The built-in model quotes the tool's output: the output went back with the whole history.
    said = answer(events)
    assert said.startswith("exec_command returned:") and "codex-roundtrip" in said


# Codex waits up to 150 ms for a command it has just spawned (``UnifiedExecProcess::from_spawned``,
# codex-rs/core/src/unified_exec/process.rs): one that has exited by then with what looks like a
# sandbox denial ("Read-only file system") goes back to the model as a denial before Codex reports
# the command, so ``codex exec --json`` shows no ``command_execution`` item for it. A command that
# lives longer is reported like any other (begin, end, its exit code and output). The write is
# made after a pause so that it is reported whatever the machine's speed.
OUTLIVES_CODEX_EARLY_EXIT_WAIT = "sleep 1; "


def test_the_sandbox_is_read_only(codex: Path, server: OrgateServer, tmp_path: Path) -> None:
    cli = Codex(codex, server, tmp_path, "orgate/echo")
    events = cli.exec(f"{OUTLIVES_CODEX_EARLY_EXIT_WAIT}touch written-by-codex")
    [command] = items(events, "command_execution")
    assert command["exit_code"] != 0 and command["status"] == "failed"
    assert "Read-only file system" in command["aggregated_output"]
    assert not (cli.workdir / "written-by-codex").exists()
    # What the sandbox said went back to the model, which quotes it.
    assert "Read-only file system" in answer(events)


def test_a_text_turn_through_an_openai_chat_upstream(
    codex: Path, server: OrgateServer, chat: FakeOpenAIChat, tmp_path: Path
) -> None:
    chat.requests.clear()
    cli = Codex(codex, server, tmp_path, "fake-chat")
    assert answer(cli.exec("say hello")) == "Hello from the chat upstream."
    [sent] = chat.bodies
    assert "client_metadata" not in sent and "reasoning_effort" not in sent
    # Codex's hosted tools (web_search, namespace) are dropped; its function tools reach the model.
    names = [t["function"]["name"] for t in sent["tools"]]
    assert "exec_command" in names and all(t["type"] == "function" for t in sent["tools"])


def test_a_shell_round_trip_through_an_openai_chat_upstream(
    codex: Path, server: OrgateServer, chat: FakeOpenAIChat, tmp_path: Path
) -> None:
    chat.requests.clear()
    cli = Codex(codex, server, tmp_path, "fake-chat")
    events = cli.exec("run: echo via-chat")
    [command] = items(events, "command_execution")
    assert command["exit_code"] == 0 and "via-chat" in command["aggregated_output"]
    assert answer(events).startswith("The command printed:") and "via-chat" in answer(events)
    second = chat.bodies[-1]["messages"]
    assert [m["role"] for m in second[-2:]] == ["assistant", "tool"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "exec_command"


def test_a_multi_turn_session_sends_the_whole_history(
    codex: Path, server: OrgateServer, chat: FakeOpenAIChat, tmp_path: Path
) -> None:
    chat.requests.clear()
    cli = Codex(codex, server, tmp_path, "fake-chat")
    answer(cli.exec("say hello, first turn"))
    assert (
        answer(cli.exec("resume", "--last", "say hello, second turn"))
        == "Hello from the chat upstream."
    )
    history = chat.bodies[-1]["messages"]
    said = [
        (
            m["role"],
            m["content"]
            if isinstance(m["content"], str)
            else " ".join(p.get("text", "") for p in m["content"]),
        )
        for m in history
    ]
    assert ("user", "say hello, first turn") in said
    assert ("assistant", "Hello from the chat upstream.") in said
    assert said[-1] == ("user", "say hello, second turn")


def test_output_schema_through_the_builtin_model(
    codex: Path, server: OrgateServer, tmp_path: Path
) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["answer", "count"],
        "additionalProperties": False,
    }
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    cli = Codex(codex, server, tmp_path, "orgate/echo")
    before = responses_requests(server)
    said = answer(cli.exec("--output-schema", str(tmp_path / "schema.json"), "echo schema-run"))
    jsonschema.validate(json.loads(said), schema)
    # A tool call, then the JSON answer after its output: no loop of retries.
    assert responses_requests(server) - before <= 3


def test_the_websocket_transport(codex: Path, server: OrgateServer, tmp_path: Path) -> None:
    cli = Codex(codex, server, tmp_path, "orgate/echo", websocket=True)
    events = cli.exec("echo codex-socket")
    [command] = items(events, "command_execution")
    assert command["exit_code"] == 0 and "codex-socket" in command["aggregated_output"]
    assert "codex-socket" in answer(events)
    assert "successfully connected to Responses WebSocket status=101" in cli.stderr


def test_an_openai_model_name_shell_round_trip_through_the_builtin_model(
    codex: Path, server: OrgateServer, tmp_path: Path
) -> None:
    cli = Codex(codex, server, tmp_path, "gpt-5.5")
    events = cli.exec("echo named-like-openai")
    [command] = items(events, "command_execution")
    assert command["exit_code"] == 0 and "named-like-openai" in command["aggregated_output"]
    assert answer(events).startswith("exec_command returned:")


def test_an_openai_model_name_text_turn_through_an_openai_chat_upstream(
    codex: Path, server: OrgateServer, chat: FakeOpenAIChat, tmp_path: Path
) -> None:
    chat.requests.clear()
    cli = Codex(codex, server, tmp_path, "gpt-5.5-mini")
    assert answer(cli.exec("say hello")) == "Hello from the chat upstream."
    [sent] = chat.bodies
    assert sent["model"] == "fake-model" and sent["reasoning_effort"] == "medium"


def test_codex_custom_apply_patch_tool_through_the_builtin_model(
    codex: Path, server: OrgateServer, tmp_path: Path
) -> None:
    """Codex offers ``apply_patch`` as a ``custom`` tool for OpenAI's names: the model's call comes
    back as a ``custom_tool_call`` and Codex applies the patch (``workspace-write``) and sends its
    ``custom_tool_call_output``, which the model quotes."""
    cli = Codex(codex, server, tmp_path, "gpt-5.5")
    events = cli.exec("--sandbox", "workspace-write", PATCH)
    [change] = items(events, "file_change")
    assert change["status"] == "completed" and change["changes"][0]["kind"] == "add"
    assert (cli.workdir / "hello.txt").read_text() == "hello from a patch\n"
    said = answer(events)
    assert said.startswith("apply_patch returned:") and "hello.txt" in said


def test_codex_custom_apply_patch_is_refused_by_the_read_only_sandbox(
    codex: Path, server: OrgateServer, tmp_path: Path
) -> None:
    cli = Codex(codex, server, tmp_path, "gpt-5.5")
    said = answer(cli.exec(PATCH))
    assert said.startswith("apply_patch returned:") and "read-only" in said
    assert not (cli.workdir / "hello.txt").exists()


def test_codex_custom_apply_patch_tool_through_an_openai_chat_upstream(
    codex: Path, server: OrgateServer, chat: FakeOpenAIChat, tmp_path: Path
) -> None:
    chat.requests.clear()
    cli = Codex(codex, server, tmp_path, "gpt-5.5-mini")
    events = cli.exec("--sandbox", "workspace-write", PATCH)
    assert (cli.workdir / "hello.txt").read_text() == "hello from a patch\n"
    assert answer(events).startswith("The command printed:") and "hello.txt" in answer(events)
    first, second = chat.bodies[0], chat.bodies[-1]
    assert first["reasoning_effort"] == "medium"
    [patch_tool] = [t["function"] for t in first["tools"] if t["function"]["name"] == "apply_patch"]
    assert (
        patch_tool["parameters"]["required"] == ["input"]
        and "Lark grammar" in patch_tool["description"]
    )
    # The custom call and its output went back as the function call and tool message they stand for.
    call, output = second["messages"][-2:]
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"input": PATCH}
    assert output["role"] == "tool" and output["tool_call_id"] == call["tool_calls"][0]["id"]


def test_a_text_turn_with_tools_in_an_additional_tools_item(
    codex: Path, server: OrgateServer, tmp_path: Path
) -> None:
    """For its newest model names Codex sends no ``tools``: every tool (in namespaces, which only a
    native Responses upstream runs) comes in an ``additional_tools`` input item."""
    cli = Codex(codex, server, tmp_path, "gpt-6-sol")
    assert answer(cli.exec("say hello")) == "say hello"


@pytest.fixture(scope="module")
def spent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpentBudget]:
    with spent_budget_gateway(tmp_path_factory.mktemp("spent-codex")) as running:
        yield running


@pytest.mark.parametrize("websocket", [False, True], ids=["sse", "websocket"])
def test_a_spent_structured_budget_is_not_sent_again(
    codex: Path, spent: SpentBudget, tmp_path: Path, websocket: bool
) -> None:
    """``--output-schema`` against an upstream whose every answer fails the schema: one turn is
    one request to orgate, ``CALLS_PER_REQUEST`` upstream calls, one review entry. Codex sends a
    5xx or a ``response.failed`` again on its own (five times, a turn's stream retries), a 400
    not: the spent budget is a 400 before the stream, over HTTP and over its WebSocket."""
    (tmp_path / "schema.json").write_text(json.dumps(PERSON))
    cli = Codex(codex, spent.server, tmp_path, MODEL, websocket=websocket)
    calls, reviews = spent.calls(), spent.reviews()
    events = cli.exec("--output-schema", str(tmp_path / "schema.json"), "Ada, 36", check=False)
    assert spent.calls() - calls == CALLS_PER_REQUEST, (events, cli.stderr[-2000:])
    assert spent.reviews() - reviews == 1
    failures = [e for e in events if e["type"] in ("error", "turn.failed")]
    assert cli.returncode != 0 and failures, events
    assert "structured-output checks" in json.dumps(failures), failures
