"""A real ``orgate serve`` with two tenants and an admin key, and Debian's chromium driven by
Playwright.

Every page a test opens fails the test on a browser console error, a page error, or a
request to any origin but the server's. ``ORGATE_CONSOLE_SCREENSHOTS=DIR`` makes
``shoot(page, name)`` save a PNG per page into DIR (``scripts/console-screenshots.sh``
uses it for docs/console/).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server_process import OrgateServer

CHROMIUM = os.environ.get("ORGATE_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SESSION_SECRET = "console-test-secret-0123456789abcdef"
KEYS = {"alpha": "alpha-key-0001", "beta": "beta-key-0002", "root": "root-key-0003"}

CONFIG = f"""
[auth]
api_keys = [
  {{ name = "alpha", key = "{KEYS["alpha"]}", tenant = "alpha" }},
  {{ name = "beta", key = "{KEYS["beta"]}", tenant = "beta" }},
  {{ name = "root", key = "{KEYS["root"]}", tenant = "ops", admin = true }},
]

[gate]
policy = "warn"

[console]
session_secret = "{SESSION_SECRET}"

[structured]
retries = 0
on_exhaustion = "review"

[structured.formats.person]
default = {{ name = "nobody", age = 0 }}

[structured.formats.pet]
retries = 1
"""

PERSON = {
    "type": "json_schema",
    "name": "person",
    "schema": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    "strict": True,
}


def queue_for_review(server: OrgateServer, tenant: str) -> str:
    """A structured-output request that exhausts its budget: the review entry's id."""
    response = httpx.post(
        f"{server.base_url}/responses",
        headers={"Authorization": f"Bearer {KEYS[tenant]}"},
        json={
            "model": "orgate/echo",
            "input": "a person orgate:bad-json",
            "text": {"format": PERSON},
        },
        timeout=60,
    )
    review_id = response.headers.get("x-orgate-review-id")
    assert review_id, (response.status_code, response.text)
    return review_id


WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A browser test starts a server and chromium and waits on pages: on a loaded machine that
    outlasts the suite's per-test timeout, so these get a generous one of their own."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.timeout(600))


def console_client(server: OrgateServer, tenant: str) -> httpx.Client:
    """A script's console session for ``tenant``: the cookie, and the CSRF token that every
    POST and DELETE sends."""
    client = httpx.Client(base_url=server.url, timeout=60)
    response = client.post("/console/api/session", json={"key": KEYS[tenant]})
    assert response.status_code == 200, response.text
    client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return client


def create(server: OrgateServer, tenant: str, **body: Any) -> dict[str, Any]:
    """A response created through the public API with ``tenant``'s key."""
    response = httpx.post(
        f"{server.base_url}/responses",
        headers={"Authorization": f"Bearer {KEYS[tenant]}"},
        json={"model": "orgate/echo", **body},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    if body.get("stream"):
        return {"stream": response.text}
    return dict(response.json())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrgateServer]:
    work = tmp_path_factory.mktemp("console")
    with OrgateServer(CONFIG, api_key=KEYS["alpha"], workdir=str(work)) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM}: run scripts/chromium.sh")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


class Watched:
    """A page plus what went wrong in it: console errors, page errors, foreign requests."""

    def __init__(self, page: Any, origin: str) -> None:
        self.page = page
        self.problems: list[str] = []
        #: URLs a test expects to fail (an error status the page shows): Chromium logs those too.
        self.expected_failures: list[str] = []

        def on_console(msg: Any) -> None:
            url = (msg.location or {}).get("url", "")
            if msg.type == "error" and not any(part in url for part in self.expected_failures):
                self.problems.append(f"console: {msg.text} ({url})")

        page.on("console", on_console)
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))

        def on_request(request: Any) -> None:
            if not request.url.startswith(origin + "/") and not request.url.startswith("data:"):
                self.problems.append(f"request to another origin: {request.url}")

        page.on("request", on_request)


@pytest.fixture
def watched(browser: Any, server: OrgateServer) -> Iterator[Any]:
    """Open a fresh browser context per call; every page is checked when the test ends."""
    opened: list[tuple[Any, Watched]] = []

    def open_page(expected_failures: tuple[str, ...] = ()) -> Any:
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        context.set_default_timeout(120_000)  # polls; only a stuck page waits this long
        page = context.new_page()
        watch = Watched(page, server.url)
        watch.expected_failures.extend(expected_failures)
        opened.append((context, watch))
        return page

    yield open_page
    problems = [p for _, w in opened for p in w.problems]
    for context, _ in opened:
        context.close()
    assert not problems, problems


def sign_in(page: Any, server: OrgateServer, tenant: str) -> None:
    page.goto(f"{server.url}/console")
    page.fill("#key", KEYS[tenant])
    page.click("button[type=submit]")
    # (wait_for_function would evaluate a string, which the console's CSP refuses)
    page.wait_for_selector("#traffic")


def shoot(page: Any, name: str) -> None:
    """Save a screenshot for the docs when ORGATE_CONSOLE_SCREENSHOTS names a folder."""
    folder = os.environ.get("ORGATE_CONSOLE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=False)
