"""Hostile JSON Schemas against a real ``orgate serve``: each is refused or answered quickly,
and while they are in flight other requests, ``/healthz`` and SIGTERM are unaffected.

Each case once froze the whole server (minutes of regex backtracking, gigabytes of generated
value). The bounds are generous — a loaded 2-core machine must pass — and still far below
what the unbounded work took.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Script
from tests.hardening.conftest import server_env
from tests.server_process import OrgateServer

EVIL = "^(a+)+$"
EVIL_TEXT = "a" * 30 + "!"
ANSWER_WITHIN = 60.0  # seconds for a hostile request to be answered (unbounded: minutes, or never)
NORMAL_WITHIN = 10.0  # seconds for a normal request or /healthz while the hostile ones are served
STOP_WITHIN = 20.0  # seconds from SIGTERM to exit


def _obj(**props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


def _fmt(
    schema: dict[str, Any], prompt: str = "hi", model: str = "orgate/echo", name: str = "out"
) -> dict[str, Any]:
    return {
        "model": model,
        "input": prompt,
        "text": {"format": {"type": "json_schema", "name": name, "schema": schema}},
    }


def _tool(parameters: dict[str, Any], prompt: str = "hi") -> dict[str, Any]:
    return {
        "model": "orgate/echo",
        "input": prompt,
        "tools": [{"type": "function", "name": "f", "parameters": parameters}],
        "tool_choice": "required",
    }


def _laughs(levels: int) -> dict[str, Any]:
    defs = {
        f"a{i}": _obj(x={"$ref": f"#/$defs/a{i + 1}"}, y={"$ref": f"#/$defs/a{i + 1}"})
        for i in range(levels)
    }
    return {"$defs": {**defs, f"a{levels}": {"type": "string"}}, "$ref": "#/$defs/a0"}


def _fanout(levels: int) -> dict[str, Any]:
    defs = {
        f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]}
        for i in range(levels)
    }
    return {
        "type": "object",
        "$defs": {**defs, f"a{levels}": {"type": "integer"}},
        "properties": {"x": {"$ref": "#/$defs/a0"}},
    }


UNIQUE = {
    "type": "object",
    "properties": {
        "x": {"type": "array", "uniqueItems": True, "items": {"type": "object"}},
        "y": {"type": "integer"},
    },
}


# name → (body, expected: (status, code, start of param), or None for "answered quickly")
HOSTILE: dict[str, tuple[dict[str, Any], tuple[int, str, str] | None]] = {
    "format_minLength_1e9": (
        _fmt(_obj(x={"type": "string", "minLength": 1_000_000_000})),
        (400, "schema_too_complex", "text.format.schema.properties.x.minLength"),
    ),
    "format_minItems_1e9": (
        _fmt(_obj(x={"type": "array", "minItems": 1_000_000_000})),
        (400, "schema_too_complex", "text.format.schema.properties.x.minItems"),
    ),
    "format_minItems_2e5": (
        _fmt(_obj(x={"type": "array", "minItems": 200_000})),
        (400, "schema_too_complex", "text.format.schema.properties.x.minItems"),
    ),
    "tool_minLength_1e9": (
        _tool(_obj(x={"type": "string", "minLength": 1_000_000_000})),
        (400, "schema_too_complex", "tools[0].parameters.properties.x.minLength"),
    ),
    "tool_minItems_1e9": (
        _tool(_obj(x={"type": "array", "minItems": 1_000_000_000})),
        (400, "schema_too_complex", "tools[0].parameters.properties.x.minItems"),
    ),
    "tool_minProperties_1e6": (
        _tool({"type": "object", "minProperties": 1_000_000}),
        (400, "schema_too_complex", "tools[0].parameters.minProperties"),
    ),
    "format_lookahead_pattern": (
        _fmt(_obj(x={"type": "string", "pattern": "^(?=(a+)+$)a"}), EVIL_TEXT),
        (400, "invalid_json_schema", "text.format.schema"),
    ),
    "format_redos_pattern_builtin": (
        _fmt(_obj(x={"type": "string", "pattern": EVIL}), EVIL_TEXT),
        None,
    ),
    "tool_redos_pattern_builtin": (
        _tool(_obj(x={"type": "string", "pattern": EVIL}), EVIL_TEXT),
        None,
    ),
    "format_redos_pattern_upstream": (
        _fmt(_obj(x={"type": "string", "pattern": EVIL}), model="fake-chat"),
        None,
    ),
    "format_ref_tree": (_fmt(_laughs(30)), None),
    "format_unique_items_upstream": (_fmt(UNIQUE, model="fake-chat", name="uniq"), None),
    "tool_ref_fan_out": (
        _tool(_fanout(40)),
        (400, "schema_too_complex", "tools[0].parameters.$defs."),
    ),
    "format_nested_repeats": (
        _fmt(_obj(x={"type": "string", "pattern": "^((a{1000}){1000}){1000}$"})),
        None,
    ),
}


def _upstream_answer(body: dict[str, Any]) -> Script:
    """A string the client's pattern backtracks on; for the ``uniq`` format, 3,000 distinct
    objects and one wrong type (pairwise uniqueness checks took over a minute)."""
    name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
    if name == "uniq":
        return Script(
            content=orjson.dumps({"x": [{"a": i} for i in range(3000)], "y": "no"}).decode()
        )
    return Script(content=orjson.dumps({"x": EVIL_TEXT}).decode())


@pytest.fixture(scope="module")
def upstream() -> Any:
    with FakeOpenAIChat.start_in_thread(handler=_upstream_answer) as fake:
        yield fake


def _normal_traffic(
    server: OrgateServer, stop: threading.Event, worst: dict[str, float], errors: list[str]
) -> None:
    with httpx.Client(
        base_url=server.url, headers=server.headers(), timeout=ANSWER_WITHIN
    ) as client:
        while not stop.is_set():
            for name, call in (
                ("healthz", lambda: client.get("/healthz")),
                (
                    "echo",
                    lambda: client.post(
                        "/v1/responses", json={"model": "orgate/echo", "input": "hello"}
                    ),
                ),
            ):
                start = time.monotonic()
                try:
                    status = call().status_code
                except httpx.HTTPError as exc:
                    errors.append(f"{name}: {exc!r}")
                    continue
                worst[name] = max(worst.get(name, 0.0), time.monotonic() - start)
                if status != 200:
                    errors.append(f"{name}: HTTP {status}")


def _fire(
    server: OrgateServer, name: str, body: dict[str, Any]
) -> tuple[str, float, httpx.Response | str]:
    start = time.monotonic()
    try:
        with httpx.Client(headers=server.headers(), timeout=ANSWER_WITHIN) as client:
            response: httpx.Response | str = client.post(f"{server.url}/v1/responses", json=body)
    except httpx.HTTPError as exc:
        response = repr(exc)
    return name, time.monotonic() - start, response


def test_hostile_schemas_are_refused_or_answered_while_the_server_stays_responsive(
    upstream: Any,
) -> None:
    config = chat_model_config(upstream.base_url)
    server = OrgateServer(config, env=server_env()).start()
    try:
        stop = threading.Event()
        worst: dict[str, float] = {}
        errors: list[str] = []
        traffic = threading.Thread(target=_normal_traffic, args=(server, stop, worst, errors))
        traffic.start()
        try:
            with concurrent.futures.ThreadPoolExecutor(len(HOSTILE)) as pool:
                results = list(
                    pool.map(lambda item: _fire(server, item[0], item[1][0]), HOSTILE.items())
                )
        finally:
            stop.set()
            traffic.join()
        problems: list[str] = []
        for name, took, response in results:
            expected = HOSTILE[name][1]
            if isinstance(response, str):
                problems.append(f"{name}: no answer ({response}) after {took:.1f}s")
                continue
            if (
                response.status_code >= 500
                and response.json()["error"].get("type") != "model_error"
            ):
                problems.append(f"{name}: HTTP {response.status_code} {response.text[:300]}")
            if expected is not None:
                error = response.json().get("error") or {}
                got = (response.status_code, error.get("code"), error.get("param"))
                if got[:2] != expected[:2] or not str(got[2]).startswith(expected[2]):
                    problems.append(f"{name}: {got} != {expected}: {response.text[:300]}")
                elif "schema_too_complex" in expected and "limits.max_schema_" not in error.get(
                    "message", ""
                ):
                    problems.append(f"{name}: the message names no limit: {error.get('message')}")
        assert not problems, "\n".join(problems)
        assert not errors, errors[:5]
        assert worst.get("healthz", 0.0) < NORMAL_WITHIN, worst
        assert worst.get("echo", 0.0) < NORMAL_WITHIN, worst
        # The upstream was asked for both formats (so the safety net's re-check ran on its outputs).
        names = {
            ((r.body or {}).get("response_format") or {}).get("json_schema", {}).get("name")
            for r in upstream.requests
        }
        assert {"out", "uniq"} <= names, names
        # SIGTERM while a second round of hostile requests is in flight: the server stops promptly.
        with concurrent.futures.ThreadPoolExecutor(len(HOSTILE)) as pool:
            in_flight = [
                pool.submit(_fire, server, name, case[0]) for name, case in HOSTILE.items()
            ]
            start = time.monotonic()
            code = server.stop(timeout=STOP_WITHIN)
            stopped_in = time.monotonic() - start
            concurrent.futures.wait(in_flight)
        assert stopped_in < STOP_WITHIN
        assert code is not None and code >= 0, (
            f"killed, not stopped (exit {code}):\n{server.output()[-2000:]}"
        )
    finally:
        server.kill()
