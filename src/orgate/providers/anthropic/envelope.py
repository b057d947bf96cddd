"""The round-trip envelope for Anthropic thinking blocks, kept in a reasoning item's
``encrypted_content``.

Anthropic checks a thinking block's ``signature`` against its exact ``thinking``
text, and ``redacted_thinking`` blocks carry only opaque ``data``. Both must go
back unchanged in the next request to the same provider. A reasoning item's
``content`` is not accepted on input by the spec (``ReasoningItemParam.content``
is ``null``-only), so the decoder packs the whole run of consecutive thinking
blocks into ``encrypted_content``::

    orgate.anthropic.v1:<base64url(JSON {"blocks": [{"type": "thinking", "thinking", "signature"} |
                                                  {"type": "redacted_thinking", "data"}]})>

The prefix tells any component (this provider's mapping, the replay gate, other
providers) where the item came from; items without it are not Anthropic's and
are dropped by the anthropic mapping.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

PREFIX = "orgate.anthropic.v1:"


def is_anthropic_reasoning(encrypted_content: Any) -> bool:
    """Whether an ``encrypted_content`` value was made by the anthropic provider."""
    return isinstance(encrypted_content, str) and encrypted_content.startswith(PREFIX)


def encode_blocks(blocks: list[dict[str, Any]]) -> str:
    """Pack thinking / redacted_thinking blocks (as Anthropic wire dicts) into an envelope
    string."""
    raw = orjson.dumps({"blocks": blocks})
    return PREFIX + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_blocks(encrypted_content: Any) -> list[dict[str, Any]] | None:
    """The thinking blocks of an envelope, or None when it is not a (valid) anthropic envelope."""
    if not is_anthropic_reasoning(encrypted_content):
        return None
    payload = encrypted_content[len(PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        data = orjson.loads(raw)
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        return None
    blocks = data.get("blocks") if isinstance(data, dict) else None
    if not isinstance(blocks, list):
        return None
    out: list[dict[str, Any]] = []
    for block in blocks:
        if not isinstance(block, dict):
            return None
        kind = block.get("type")
        if kind == "thinking" and isinstance(block.get("signature"), str):
            out.append(
                {
                    "type": "thinking",
                    "thinking": str(block.get("thinking") or ""),
                    "signature": block["signature"],
                }
            )
        elif kind == "redacted_thinking" and isinstance(block.get("data"), str):
            out.append({"type": "redacted_thinking", "data": block["data"]})
        else:
            return None
    return out
