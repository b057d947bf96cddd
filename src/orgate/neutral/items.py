"""Extension items: an upstream's own output items, kept for the upstream that made them.

A native Responses upstream may answer with items the Open Responses output
union does not know (``web_search_call``, ``file_search_call``,
``openai:...``). The provider yields each as an ``ExtensionItem`` event (the
complete raw item and its ``origin``); the builder keeps it out of the spec
output and the store keeps it in the conversation history, wrapped as::

    {"type": "orgate:extension_item", "id": "ext_...", "origin": "<origin>", "item":
    {<the raw item>}}

Read back as history (``previous_response_id``, a session, a WebSocket
connection's cache), the wrapper becomes an ``OpaqueItem`` in
``ModelRequest.input``. Only a provider whose own origin equals the item's
sends the raw item upstream, unchanged; every other provider leaves it out
(the engine reports that). A client can never send one: the wrapper's type
is provider-namespaced, which the input gate refuses (or drops).

**Origin** = the provider kind and the deployment's base URL (``origin_of``):
items go back to the same upstream service whatever its model or API key,
never to another service speaking the same protocol.

**Reasoning origins.** A reasoning item is a spec item (the client sees it
unchanged), but its ``encrypted_content`` only means something to the
upstream that made it. In the stored history (never in what a client sees)
such an item carries the orgate-private field ``ORIGIN_FIELD``
(``"orgate:origin": "<origin>"``); read back, the field stays on the input
item model (protocol models keep unknown fields), and the ``openai-responses``
provider sends the item only to that origin (``reasoning_origin``). Items
stored before origins were recorded have no such field and go as before.
"""

from __future__ import annotations

from typing import Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from orgate.neutral.deployment import Deployment

EXTENSION_ITEM_TYPE: Final = "orgate:extension_item"
ORIGIN_FIELD = "orgate:origin"  # on a stored reasoning item: the origin of its encrypted_content


def origin_of(deployment: Deployment) -> str:
    """``"<provider> <base URL>"``: scheme and host lower-cased, no credentials, default port,
    query or trailing ``/`` (the origin is stored with the item)."""
    base = deployment.base_url.strip()
    try:
        parts = urlsplit(base)
        port = parts.port
    except ValueError:
        return f"{deployment.provider} {base.rstrip('/')}"
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    return f"{deployment.provider} {scheme}://{host}{parts.path.rstrip('/')}"


class OpaqueItem(BaseModel):
    """A stored extension item in a conversation's history (never from a client's request)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Literal["orgate:extension_item"] = EXTENSION_ITEM_TYPE
    id: str | None = None  # orgate's id of the stored item (the raw item keeps its own)
    origin: str
    item: dict[str, Any]

    @property
    def item_type(self) -> str:
        """The raw item's own ``type`` (e.g. ``web_search_call``)."""
        kind = self.item.get("type")
        return kind if isinstance(kind, str) else "?"


def extension_wire(item_id: str, origin: str, item: dict[str, Any]) -> dict[str, Any]:
    """The stored (wire) form of one extension item."""
    return {"type": EXTENSION_ITEM_TYPE, "id": item_id, "origin": origin, "item": item}


def with_origin(item: dict[str, Any], origin: str) -> dict[str, Any]:
    """A stored reasoning item marked with the origin that made its ``encrypted_content``
    (a copy)."""
    return {**item, ORIGIN_FIELD: origin}


def reasoning_origin(item: dict[str, Any]) -> str | None:
    """Pop and return the origin marker of a reasoning item in wire form (None:
    unknown, e.g. older history)."""
    origin = item.pop(ORIGIN_FIELD, None)
    return origin if isinstance(origin, str) else None


__all__ = [
    "EXTENSION_ITEM_TYPE",
    "ORIGIN_FIELD",
    "OpaqueItem",
    "extension_wire",
    "origin_of",
    "reasoning_origin",
    "with_origin",
]
