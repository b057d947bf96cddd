"""The log redaction: credential header values in every form, known secrets anywhere in a line."""

from __future__ import annotations

import logging

import orjson
import pytest

from orgate.server.log_redaction import REDACTED, RedactingFormatter, Redactor, url_password
from orgate.server.observability import JsonFormatter, TextFormatter


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("< authorization: Bearer sk-abc123", f"< authorization: {REDACTED}"),
        ("< Authorization: Basic Zm9vOmJhcg==", f"< Authorization: {REDACTED}"),
        ("< x-api-key: sk-ant-1", f"< x-api-key: {REDACTED}"),
        ("< api-key: azure1", f"< api-key: {REDACTED}"),
        ("< cookie: a=1; b=2", f"< cookie: {REDACTED}"),
        ("> set-cookie: s=1; Path=/", f"> set-cookie: {REDACTED}"),
        (
            "{'authorization': 'Bearer x', 'host': 'h'}",
            f"{{'authorization': '{REDACTED}', 'host': 'h'}}",
        ),
        ('{"X-Api-Key": "k1", "a": 1}', f'{{"X-Api-Key": "{REDACTED}", "a": 1}}'),
        ("headers authorization=Bearer x", f"headers authorization={REDACTED}"),
        ("the authorization failed", "the authorization failed"),  # a word, not a header
        ("< host: example.com", "< host: example.com"),
    ],
)
def test_credential_headers(text: str, expected: str) -> None:
    assert Redactor()(text) == expected


def test_configured_header_names_and_secrets() -> None:
    redactor = Redactor()
    redactor.add_headers(["X-Tenant-Token"])
    redactor.add_secrets(["tok-123456", None, "short", "tok-123456-longer"])
    assert redactor("x-tenant-token: anything") == f"x-tenant-token: {REDACTED}"
    assert redactor("saw tok-123456-longer and tok-123456") == f"saw {REDACTED} and {REDACTED}"
    assert redactor("short stays") == "short stays"  # too short to search for


def record(msg: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise RuntimeError("failed with authorization: Bearer sk-in-trace-999999")
        except RuntimeError:
            import sys

            exc_info = sys.exc_info()
    return logging.LogRecord("t", logging.DEBUG, __file__, 1, msg, args, exc_info)


@pytest.mark.parametrize("inner", [TextFormatter(), JsonFormatter()], ids=["text", "json"])
def test_formatter_redacts_message_args_traceback_and_fields(inner: logging.Formatter) -> None:
    redactor = Redactor()
    redactor.add_secrets(["sk-known-777777"])
    formatter = RedactingFormatter(inner, redactor)
    item = record("< %s: %s", "authorization", "Bearer sk-from-args-888888", exc=True)
    item.key = "sk-known-777777"  # an extra field (JSON lines carry them)
    line = formatter.format(item)
    for secret in ("sk-from-args-888888", "sk-in-trace-999999", "sk-known-777777"):
        assert secret not in line
    if isinstance(inner, JsonFormatter):
        entry = orjson.loads(line)
        assert entry["msg"] == f"< authorization: {REDACTED}"


def test_url_password() -> None:
    assert url_password("postgresql://u:pw-secret@db/x") == "pw-secret"
    assert url_password("redis://localhost:6379/0") is None
    assert url_password(None) is None
