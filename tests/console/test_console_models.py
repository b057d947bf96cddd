"""The Models page: the configured upstream models, and an admin's probe of one (a fake
upstream behaving like llama-cpp-python's server) with the mode orgate will use and why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.console.conftest import CONFIG, KEYS, shoot, sign_in
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.probe.test_probe import llama_cpp_python
from tests.server_process import OrgateServer


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat.start_in_thread() as fake:
        fake.handler = llama_cpp_python
        fake.owned_by = "me"
        yield fake


@pytest.fixture(scope="module")
def server(
    upstream: FakeOpenAIChat, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OrgateServer]:
    """The console's server, with one upstream model (overrides the conftest's)."""
    model = (
        f'\n[[models]]\nname = "local"\nprovider = "openai-chat"\n'
        f'base_url = "{upstream.base_url}"\nupstream_model = "fake-model"\nread_timeout = 30\n'
    )
    work = tmp_path_factory.mktemp("console-models")
    with OrgateServer(CONFIG + model, api_key=KEYS["alpha"], workdir=str(work)) as running:
        yield running


def _client(server: OrgateServer, tenant: str) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=120)
    answer = client.post("/console/api/session", json={"key": KEYS[tenant]})
    assert answer.status_code == 200
    client.headers["X-CSRF-Token"] = answer.json()["csrf_token"]
    client.headers["Origin"] = server.url
    return client


def test_an_admin_probes_a_model_from_the_page(
    watched: Any, server: OrgateServer, upstream: FakeOpenAIChat
) -> None:
    page = watched()
    sign_in(page, server, "root")
    page.goto(f"{server.url}/console#/models")
    row = page.locator('tr[data-model="local"]')
    assert "json_schema, json_object_schema" in row.inner_text()
    upstream.requests.clear()
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator("button").click()
    report = page.locator("#probe-local")
    report.wait_for()
    assert "JSON schemas go as json_object_schema: json_schema refused" in report.inner_text()
    assert 'capabilities.schema_dialects = ["json_object_schema"]' in report.inner_text()
    assert "llama-cpp-python" in report.inner_text()
    assert len(upstream.bodies) == 10  # the probe's requests, made on the click only
    shoot(page, "models")


def test_only_an_admin_may_probe_and_never_without_the_csrf_token(
    server: OrgateServer, upstream: FakeOpenAIChat
) -> None:
    upstream.requests.clear()
    alpha = _client(server, "alpha")
    listed = alpha.get("/console/api/models").json()["data"]
    assert [m["name"] for m in listed] == ["local"] and listed[0]["server"] == "auto"
    refused = alpha.post("/console/api/models/local/probe")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_required"
    root = _client(server, "root")
    del root.headers["X-CSRF-Token"]
    assert root.post("/console/api/models/local/probe").status_code == 403
    assert root.post("/console/api/models/nope/probe", headers={}).status_code in (403, 404)
    assert upstream.bodies == []
