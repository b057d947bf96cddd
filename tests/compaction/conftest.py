"""The compaction tests share the WebSocket tests' in-process app (echo + ``fake-chat``)."""

from tests.ws.conftest import app_server  # noqa: F401 - re-exported fixture
