"""The authenticator: plain and hashed keys, and the memory of accepted tokens."""

from __future__ import annotations

import hashlib

import pytest

from orgate.config import ResolvedKey
from orgate.protocol.errors import ApiError
from orgate.server import auth
from orgate.server.auth import Authenticator


def _keys() -> list[ResolvedKey]:
    return [
        ResolvedKey(name="plain", tenant="t1", secret=b"sk-plain", sha256=None, models=None),
        ResolvedKey(
            name="hashed",
            tenant="t2",
            secret=None,
            sha256=hashlib.sha256(b"sk-hashed").digest(),
            models=("m",),
        ),
    ]


def test_plain_and_hashed_keys_twice_each() -> None:
    authenticator = Authenticator(_keys())
    for _ in range(2):  # the second time from the memory of accepted tokens
        assert authenticator.authenticate("Bearer sk-plain").tenant == "t1"
        caller = authenticator.authenticate("bearer  sk-hashed ")
        assert (caller.key_name, caller.tenant, caller.models) == ("hashed", "t2", ("m",))


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (None, "missing_api_key"),
        ("", "missing_api_key"),
        ("Basic sk-plain", "invalid_api_key"),
        ("Bearer ", "invalid_api_key"),
        ("Bearer sk-plai", "invalid_api_key"),
        ("Bearer sk-plainx", "invalid_api_key"),
    ],
)
def test_refusals_are_never_remembered(header: str | None, code: str) -> None:
    authenticator = Authenticator(_keys())
    authenticator.authenticate("Bearer sk-plain")
    for _ in range(2):
        with pytest.raises(ApiError) as refused:
            authenticator.authenticate(header)
        assert (refused.value.status, refused.value.code) == (401, code)
    assert list(authenticator._accepted) == ["sk-plain"]


def test_the_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "REMEMBERED_KEYS", 3)
    keys = [
        ResolvedKey(name=f"k{i}", tenant="t", secret=f"sk-{i}".encode(), sha256=None, models=None)
        for i in range(5)
    ]
    authenticator = Authenticator(keys)
    for i in range(5):
        assert authenticator.authenticate(f"Bearer sk-{i}").key_name == f"k{i}"
        assert len(authenticator._accepted) <= 3
    assert authenticator.authenticate("Bearer sk-0").key_name == "k0"
