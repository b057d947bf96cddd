"""OpenAI's Conversations API over orgate's sessions: a session is a conversation.

A conversation is a session (the ``sessions`` table: a pointer to its latest response, and
a lease that lets one turn run at a time). Its items are the input and output items of
the chain that ends at that response, without the ones deleted from the conversation (the
session's ``hidden`` ids; the responses keep them). So the three ways to name one —
``X-Session-Id``, the body's ``user``, the body's ``conversation`` — all reach the same
thing, and ``GET /v1/conversations/{id}/items`` lists a header session's turns too.

- ``create``: a new session (``conv_…`` id, metadata); its initial items, if any, are added
  as below.
- Adding items takes the session's turn (409 ``session_busy`` while a turn runs) and stores
  them as one response of their own: no model, no output, the items as its input, chained
  to the conversation's latest response (``items_record``). They pass the input gate as a
  response's input does (call/output pairing against the conversation).
- Listing reads the chain in one query and pages in memory (``limit``, ``order``,
  ``after``): spec items only (an upstream's own items stay in the history for that
  upstream), in the item shape a response's items have.
- Deleting an item hides it; deleting the conversation deletes the session (its responses
  stay, as OpenAI keeps a deleted conversation's items).

Every operation is scoped to the caller's tenant: another tenant's conversation is a 404.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from orgate.engine import ids
from orgate.engine.builder import usage_dict
from orgate.engine.compaction.core import expand
from orgate.engine.create_options import conversation_id
from orgate.engine.history_items import as_item_field, item_to_wire, items_from_wire, listed_item
from orgate.engine.input_gate import check_context, split_namespaced
from orgate.engine.response_echo import response_skeleton
from orgate.engine.service import (
    Caller,
    ResponsesService,
    conversation_lost,
    conversation_not_found,
    session_busy,
    store_failure,
)
from orgate.protocol import CreateResponseBody, ItemParam, MetadataParam
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    from_validation_error,
    invalid_type,
    invalid_value,
    not_an_object,
    not_found,
    unknown_parameter,
)
from orgate.store import (
    Conversation,
    ResponseStore,
    SessionBusy,
    StoreError,
    UnknownResponse,
    UnknownSession,
)
from orgate.store.base import item_id_for

_METADATA = TypeAdapter(MetadataParam)


class _Items(BaseModel):
    """``items`` of a create or an addition (each a response input item)."""

    items: list[ItemParam]


class ConversationsService:
    """The Conversations API's operations, over the responses service's store and input rules."""

    def __init__(self, responses: ResponsesService, max_items: int) -> None:
        self.responses = responses
        self.max_items = max_items

    @property
    def store(self) -> ResponseStore:
        store = self.responses.store
        if store is None:
            raise ApiError.of(
                ErrorCode.NOT_FOUND,
                "This server stores no conversations ([store] enabled = false).",
            )
        return store

    # -- the conversation

    async def create(self, caller: Caller, data: Any) -> dict[str, Any]:
        """``POST /v1/conversations``: ``items`` (optional), ``metadata``, ``safety_identifier``."""
        body = _object(data, allowed=("items", "metadata", "safety_identifier"))
        metadata = _metadata(body.get("metadata"))
        safety = body.get("safety_identifier")
        if safety is not None and not isinstance(safety, str):
            raise invalid_type(
                "Invalid 'safety_identifier': expected a string.", param="safety_identifier"
            )
        raw = body.get("items")
        items = await self._items(caller, raw, []) if raw else []
        try:
            conversation = await self.store.create_conversation(
                caller.tenant, ids.new_id("conv"), metadata=metadata
            )
            if items:
                await self._append(caller, conversation.id, None, items)
        except StoreError as exc:
            raise store_failure(exc) from None
        return conversation.to_wire()

    async def retrieve(self, caller: Caller, conversation: str) -> dict[str, Any]:
        return (await self._conversation(caller, conversation)).to_wire()

    async def update(self, caller: Caller, conversation: str, data: Any) -> dict[str, Any]:
        """``POST /v1/conversations/{id}``: ``metadata`` (required; null clears it)."""
        body = _object(data, allowed=("metadata",))
        if "metadata" not in body:
            raise ApiError.of(
                ErrorCode.MISSING_REQUIRED_PARAMETER,
                "Missing required parameter: 'metadata'.",
                param="metadata",
            )
        metadata = _metadata(body["metadata"])
        try:
            updated = await self.store.update_conversation(
                conversation, caller.tenant, metadata=metadata
            )
        except StoreError as exc:
            raise store_failure(exc) from None
        if updated is None:
            raise conversation_not_found(conversation, param="conversation_id")
        return updated.to_wire()

    async def delete(self, caller: Caller, conversation: str) -> dict[str, Any]:
        try:
            deleted = await self.store.delete_conversation(conversation, caller.tenant)
        except SessionBusy:
            raise session_busy(conversation, param="conversation_id") from None
        except StoreError as exc:
            raise store_failure(exc) from None
        if not deleted:
            raise conversation_not_found(conversation, param="conversation_id")
        return {"id": conversation, "object": "conversation.deleted", "deleted": True}

    # -- its items

    async def list_items(
        self, caller: Caller, conversation: str, *, limit: int, order: str, after: str | None
    ) -> dict[str, Any]:
        """A page of the conversation's items (``order`` ``asc`` or ``desc``, after the item
        ``after``: an id that is not among them gives an empty page)."""
        pairs = await self._visible(caller, conversation)
        if order == "desc":
            pairs.reverse()
        if after is not None:
            position = next((i for i, (item_id, _) in enumerate(pairs) if item_id == after), None)
            pairs = [] if position is None else pairs[position + 1 :]
        page = pairs[:limit]
        return {
            "object": "list",
            "data": [item for _, item in page],
            "first_id": page[0][0] if page else None,
            "last_id": page[-1][0] if page else None,
            "has_more": len(pairs) > limit,
        }

    async def add_items(self, caller: Caller, conversation: str, data: Any) -> dict[str, Any]:
        """``POST /v1/conversations/{id}/items``: the items added, as the list of them."""
        body = _object(data, allowed=("items",))
        if "items" not in body:
            raise ApiError.of(
                ErrorCode.MISSING_REQUIRED_PARAMETER,
                "Missing required parameter: 'items'.",
                param="items",
            )
        store = self.store
        try:
            turn = await store.begin_session_turn(caller.tenant, conversation, create=False)
        except UnknownSession:
            raise conversation_not_found(conversation, param="conversation_id") from None
        except SessionBusy:
            raise session_busy(conversation, param="conversation_id") from None
        except StoreError as exc:
            raise store_failure(exc) from None
        try:
            history = await self._history(
                caller, conversation, turn.latest_response_id, turn.hidden
            )
            items = await self._items(caller, body["items"], history)
            record = await self._append(caller, conversation, turn.latest_response_id, items)
        except UnknownResponse:  # its latest response was deleted meanwhile
            raise conversation_lost(conversation, turn.latest_response_id) from None
        except StoreError as exc:
            raise store_failure(exc) from None
        finally:
            await self.responses.end_session(turn)
        added = [
            (item_id, as_item_field(item))
            for item_id, item in record
            if listed_item(item) is not None
        ]
        return {
            "object": "list",
            "data": [item for _, item in added],
            "first_id": added[0][0] if added else None,
            "last_id": added[-1][0] if added else None,
            "has_more": False,
        }

    async def get_item(self, caller: Caller, conversation: str, item_id: str) -> dict[str, Any]:
        for found_id, item in await self._visible(caller, conversation):
            if found_id == item_id:
                return item
        raise _item_not_found(item_id)

    async def delete_item(self, caller: Caller, conversation: str, item_id: str) -> dict[str, Any]:
        """Delete an item from the conversation; answers the conversation (as OpenAI does)."""
        if all(found_id != item_id for found_id, _ in await self._visible(caller, conversation)):
            raise _item_not_found(item_id)
        try:
            hidden = await self.store.hide_item(conversation, caller.tenant, item_id)
        except StoreError as exc:
            raise store_failure(exc) from None
        if not hidden:  # deleted meanwhile
            raise conversation_not_found(conversation, param="conversation_id")
        return await self.retrieve(caller, conversation)

    # -- reading and writing

    async def _conversation(self, caller: Caller, conversation: str) -> Conversation:
        try:
            found = await self.store.get_conversation(conversation, caller.tenant)
        except StoreError as exc:
            raise store_failure(exc) from None
        if found is None:
            raise conversation_not_found(conversation, param="conversation_id")
        return found

    async def _visible(self, caller: Caller, conversation: str) -> list[tuple[str, dict[str, Any]]]:
        """The conversation's items as a client sees them, with their ids, oldest first."""
        found = await self._conversation(caller, conversation)
        if found.latest_response_id is None:
            return []
        try:
            pairs = await self.store.context_items(found.latest_response_id, caller.tenant)
        except StoreError as exc:
            raise store_failure(exc) from None
        if pairs is None:
            raise conversation_lost(conversation, found.latest_response_id)
        hidden = set(found.hidden)
        visible = []
        for item_id, item in pairs:
            shown = listed_item(item) if item_id not in hidden else None
            if shown is not None:
                visible.append((item_id, as_item_field({"id": item_id, **shown})))
        return visible

    async def _history(
        self, caller: Caller, conversation: str, latest: str | None, hidden: tuple[str, ...]
    ) -> list[Any]:
        """The conversation's items as the next turn reads them (for the input gate)."""
        if latest is None:
            return []
        pairs = await self.store.context_items(latest, caller.tenant)
        if pairs is None:
            raise conversation_lost(conversation, latest)
        gone = set(hidden)
        return items_from_wire([item for item_id, item in pairs if item_id not in gone])

    async def _items(self, caller: Caller, raw: Any, history: list[Any]) -> list[Any]:
        """``items`` checked as a response's input is: parsed, references resolved, compaction
        items opened, the input gate over the conversation and them."""
        if not isinstance(raw, list):
            raise invalid_type("Invalid 'items': expected an array.", param="items")
        if len(raw) > self.max_items:
            raise ApiError.of(
                ErrorCode.TOO_MANY_ITEMS,
                f"'items' has {len(raw)} items, more than the limit of {self.max_items} "
                "(limits.max_input_items).",
                param="items",
            )
        responses = self.responses
        warnings: list[str] = []
        raw = split_namespaced(raw, responses.gate_policy, warnings)
        try:
            items: list[Any] = _Items.model_validate({"items": raw}).items
        except ValidationError as exc:
            raise from_validation_error(exc) from None
        items = await responses.resolve_references(items, caller)
        if responses.compaction_key is not None:
            items = expand(
                items, responses.compaction_key, context=caller.tenant, param_prefix="items"
            )
        check_context(history, items, responses.gate_policy, warnings)
        return items

    async def _append(
        self, caller: Caller, conversation: str, latest: str | None, items: list[Any]
    ) -> list[tuple[str, dict[str, Any]]]:
        """Store ``items`` as the conversation's next entry; returns them with their ids."""
        response_id = ids.response_id()
        created_at = int(time.time())
        wire = [item_to_wire(item) for item in items]
        await self.store.save(
            items_record(response_id, created_at, conversation),
            tenant=caller.tenant,
            input_items=wire,
            previous_response_id=latest,
            session_id=conversation,
        )
        # the ids the store gives them (an item sent without one: derived from its place)
        return [
            (item_id := item_id_for(item, response_id, position), {"id": item_id, **item})
            for position, item in enumerate(wire)
        ]


def items_record(response_id: str, created_at: int, conversation: str) -> dict[str, Any]:
    """The stored record of an addition of items: a completed response with no model, no output
    and no usage (the spec's fields at their defaults, from the one response skeleton), in the
    conversation."""
    record = response_skeleton(CreateResponseBody(model=""), [], None, None, True, None)
    record.update(
        id=response_id,
        created_at=created_at,
        completed_at=created_at,
        status="completed",
        output=[],
        usage=usage_dict(None),
        conversation={"id": conversation},
    )
    return record


def path_id(value: str) -> str:
    """A conversation id from a path, checked as the body's ``conversation`` is."""
    checked = conversation_id(value, "conversation_id")
    assert checked is not None
    return checked


def _object(data: Any, *, allowed: tuple[str, ...]) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise not_an_object()
    for key in data:
        if key not in allowed:
            raise unknown_parameter(key)
    return data


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    try:
        return dict(_METADATA.validate_python(value, strict=True))
    except ValidationError as exc:
        error = from_validation_error(exc)
        raise invalid_value(f"Invalid 'metadata': {error.message}", param="metadata") from None


def _item_not_found(item_id: str) -> ApiError:
    return not_found(f"Item with id '{item_id}' not found.", param="item_id")


__all__ = ["ConversationsService", "items_record", "path_id"]
