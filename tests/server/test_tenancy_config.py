"""A key's tenant is its explicit name: never its position in the list, never a shared default."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orgate.config import ConfigError, Settings, load_settings, resolve_api_keys
from orgate.server.auth import Authenticator

DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"  # sha256("test")


def _keys(
    api_keys: list[Any], environ: dict[str, str] | None = None
) -> dict[bytes | None, tuple[str, str, bool]]:
    settings = Settings.model_validate({"auth": {"api_keys": api_keys}})
    return {
        key.secret: (key.name, key.tenant, key.admin)
        for key in resolve_api_keys(settings, environ=environ or {})
    }


def _refused(api_keys: list[Any], *fragments: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, environ={"ORGATE_AUTH__API_KEYS": json.dumps(api_keys)})
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_the_only_plain_key_is_tenant_default() -> None:
    assert _keys(["sk-only"]) == {b"sk-only": ("default", "default", False)}


def test_plain_keys_among_several_are_refused_whatever_their_order() -> None:
    # a plain key's tenant used to be its position: reordering the list swapped tenants' data
    for order in (
        ["sk-one", "sk-two"],
        ["sk-two", "sk-one"],
        ["env:TEAM_KEY", {"name": "b", "key": "sk-b"}],
    ):
        message = _refused(order, "auth.api_keys", "a plain key is accepted only as the only entry")
        assert "sk-one" not in message and "sk-two" not in message, message
    assert "[0] (env:TEAM_KEY)" in _refused(["env:TEAM_KEY", {"name": "b", "key": "sk-b"}])


def test_a_table_without_a_name_is_refused_naming_the_entry_never_the_secret() -> None:
    message = _refused(
        [{"name": "a", "key": "sk-a"}, {"key": "sk-secret-b"}], "[1] (a literal key) needs a `name`"
    )
    assert "sk-secret-b" not in message
    _refused([{"key": "env:TEAM_B"}], "[0] (env:TEAM_B) needs a `name`")
    _refused([{"sha256": DIGEST}], "[0] (sha256 9f86d081…) needs a `name`")
    _refused([{"name": "  ", "key": "k"}], "needs a `name`")


def test_two_unnamed_keys_cannot_share_a_tenant_silently() -> None:
    _refused(
        [{"key": "sk-a"}, {"key": "sk-b"}],
        "[0] (a literal key) needs a `name`",
        "[1] (a literal key) needs a `name`",
    )


def test_names_are_unique() -> None:
    message = _refused(
        [{"name": "a", "key": "sk-1"}, {"name": "a", "key": "sk-2"}],
        "[1] (name 'a'): the name is already auth.api_keys[0]'s",
    )
    assert "sk-1" not in message and "sk-2" not in message


def test_keys_share_a_tenant_only_when_each_names_it() -> None:
    keys = _keys(
        [
            {"name": "a-2025", "key": "sk-old", "tenant": "a"},
            {"name": "a-2026", "key": "sk-new", "tenant": "a"},
        ]
    )
    assert keys == {b"sk-old": ("a-2025", "a", False), b"sk-new": ("a-2026", "a", False)}
    _refused([{"name": "a", "key": "sk-a", "tenant": ""}], "`tenant` must not be empty")


def test_admin_keys_reach_the_caller() -> None:
    keys = _keys([{"name": "ops", "key": "sk-ops", "admin": True}, {"name": "a", "key": "sk-a"}])
    assert keys == {b"sk-ops": ("ops", "ops", True), b"sk-a": ("a", "a", False)}
    settings = Settings.model_validate(
        {
            "auth": {
                "api_keys": [
                    {"name": "ops", "key": "sk-ops", "admin": True},
                    {"name": "a", "key": "sk-a"},
                ]
            }
        }
    )
    auth = Authenticator(resolve_api_keys(settings, environ={}))
    assert auth.authenticate("Bearer sk-ops").admin is True
    assert auth.authenticate("Bearer sk-a").admin is False


def test_orgate_api_key_cannot_join_a_tenant_of_that_name() -> None:
    settings = Settings.model_validate(
        {"auth": {"api_keys": [{"name": "ORGATE_API_KEY", "key": "sk-a"}]}}
    )
    with pytest.raises(ConfigError, match="named ORGATE_API_KEY"):
        resolve_api_keys(settings, environ={"ORGATE_API_KEY": "sk-other"})
    # the same secret is the same key, not a second one
    assert len(resolve_api_keys(settings, environ={"ORGATE_API_KEY": "sk-a"})) == 1
