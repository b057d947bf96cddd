"""The app factory builds and serves ``/v1/responses`` with the legacy chat package absent."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.server_process import REPO

SCRIPT = textwrap.dedent(
    """
    import asyncio, importlib.abc, sys

    class NoChat(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "orgate.legacy_chat" or name.startswith("orgate.legacy_chat."):
                raise ModuleNotFoundError("orgate.legacy_chat was deleted", name=name)
            return None

    sys.meta_path.insert(0, NoChat())

    import os
    import httpx
    from orgate.config import load_settings
    from orgate.gateway import create_app

    async def main():
        os.environ.update({"ORGATE_API_KEY": "k", "ORGATE_STORE__ENABLED": "false"})
        settings = load_settings(None)
        app = create_app(settings)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            ok = await client.post(
                "/v1/responses",
                headers={"Authorization": "Bearer k"},
                json={"model": "orgate/echo", "input": "still here"},
            )
            chat = await client.post(
                "/v1/chat/completions", headers={"Authorization": "Bearer k"}, json={}
            )
        assert ok.status_code == 200, ok.text
        assert ok.json()["output"][0]["content"][0]["text"] == "still here"
        assert chat.status_code == 404 and chat.json()["error"]["code"] == "not_found"
        assert "orgate.legacy_chat" not in sys.modules
        print("OK")

    asyncio.run(main())
    """
)


def test_app_serves_responses_without_the_chat_package() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("OK")


def test_chat_endpoint_disabled_by_default_and_warned_when_on(server: object) -> None:
    # The session server turns chat completions on: its log carries the legacy warning.
    from tests.server_process import OrgateServer

    assert isinstance(server, OrgateServer)
    assert "legacy" in server.output().lower()
    with OrgateServer("") as plain:
        import httpx

        res = httpx.post(
            f"{plain.base_url}/chat/completions",
            headers=plain.headers(),
            json={"model": "orgate/echo", "messages": []},
        )
        assert res.status_code == 404
        assert set(res.json()["error"]) == {"message", "type", "param", "code"}
        assert "legacy" not in plain.output().lower()
