"""The response store interface: records, errors and the abstract ``ResponseStore``.

The store persists wire-shaped JSON dicts (responses and conversation items) and
knows nothing of the Pydantic protocol models. Every read and write is scoped by
``tenant``: a record that belongs to another tenant is indistinguishable from a
missing one. See ``docs/store.md`` for the data model and the guarantees.
"""

from __future__ import annotations

import abc
import asyncio
import base64
import contextlib
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import orjson

_log = logging.getLogger("orgate.store")

Order = Literal["asc", "desc"]
ItemKind = Literal["input", "output"]
#: A review queue entry's state (``structured/review.py``).
ReviewStatus = Literal["pending", "resolved", "discarded"]

#: Statuses of a response that is not finished yet (owned by a live process).
ACTIVE_STATUSES: tuple[str, ...] = ("queued", "in_progress")
#: Every status a stored response may have.
STATUSES: tuple[str, ...] = (
    "queued",
    "in_progress",
    "completed",
    "incomplete",
    "failed",
    "cancelled",
)

#: The ``error`` put on responses that ``recover_interrupted`` marks failed.
INTERRUPTED_ERROR: dict[str, str] = {
    "code": "server_error",
    "message": "the orgate process handling this response stopped before it finished",
}


# --------------------------------------------------------------------------- errors


class StoreError(Exception):
    """Base class of every error raised by the store."""


class StoreUnavailable(StoreError):
    """The database cannot be reached or opened (bad path, refused connection, auth)."""


class SchemaTooNew(StoreError):
    """The database was migrated by a newer orgate than this one."""

    def __init__(self, found: int, supported: int, where: str) -> None:
        super().__init__(
            f"the store at {where} has schema version {found}, newer than the version "
            f"{supported} this orgate understands; upgrade orgate or use another database"
        )
        self.found = found
        self.supported = supported


class UnknownResponse(StoreError):
    """``save`` was given a ``previous_response_id`` the tenant does not have."""

    def __init__(self, response_id: str) -> None:
        super().__init__(f"previous response {response_id!r} not found")
        self.response_id = response_id


class ResponseConflict(StoreError):
    """``save`` was given a response id that belongs to another tenant."""


class LeaseLost(StoreError):
    """A background response's lease is no longer this process's: another took it over (its
    lease expired), or the response ended or was deleted. Nothing of it may be saved or run."""

    def __init__(self, response_id: str) -> None:
        super().__init__(f"the lease of background response {response_id!r} is lost")
        self.response_id = response_id


class SessionBusy(StoreError):
    """Another request holds the session's turn lease (the server answers 409)."""

    def __init__(self, tenant: str, session_id: str) -> None:
        super().__init__(f"session {session_id!r} has a request in progress")
        self.tenant = tenant
        self.session_id = session_id


class UnknownSession(StoreError):
    """An operation on a session (conversation) the tenant does not have."""

    def __init__(self, tenant: str, session_id: str) -> None:
        super().__init__(f"session {session_id!r} not found")
        self.tenant = tenant
        self.session_id = session_id


# --------------------------------------------------------------------------- records


class TenantInUse(StoreError):
    """A tenant rename that would merge two tenants, or move a response still being written."""


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """One stored response. Times are Unix seconds."""

    id: str
    tenant: str
    status: str
    model: str | None
    created_at: float
    updated_at: float
    previous_response_id: str | None
    session_id: str | None
    deployment: str | None
    response: dict[str, Any]
    request: dict[str, Any] | None
    #: Position in its chain: 0 for a response without ``previous_response_id``.
    depth: int
    #: Number of items in ``context(id)``: the whole chain's input and output items.
    history_len: int
    owner: str | None
    cancel_requested: bool
    expires_at: float | None


@dataclass(frozen=True, slots=True)
class StoredItem:
    """One conversation item of a response (its own input, or its output)."""

    id: str
    response_id: str
    kind: ItemKind
    position: int
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChainTail:
    """A live chain's path and its last response's own items (``ResponseStore.chain_tail``)."""

    path: tuple[str, ...]  # the chain's response ids: root first, the response itself last
    items: list[tuple[str, dict[str, Any]]]  # its own items (inputs, then outputs), with ids
    settled: bool  # no response of the chain is queued or in progress (its items are final)


@dataclass(frozen=True, slots=True)
class ItemsPage:
    """A page of ``GET /v1/responses/{id}/input_items``."""

    data: list[dict[str, Any]]
    first_id: str | None
    last_id: str | None
    has_more: bool

    def to_wire(self) -> dict[str, Any]:
        """The list body: ``{"object": "list", "data", "first_id", "last_id", "has_more"}``."""
        return {
            "object": "list",
            "data": self.data,
            "first_id": self.first_id,
            "last_id": self.last_id,
            "has_more": self.has_more,
        }


@dataclass(frozen=True, slots=True)
class ResponsesPage:
    """A page of ``list_responses``: newest first; ``next_cursor`` continues past the last."""

    data: list[StoredResponse]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class ResponseFilter:
    """What ``list_responses`` keeps: ``tenant`` None means every tenant's responses."""

    tenant: str | None = None
    status: str | None = None
    model: str | None = None
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class SessionTurn:
    """A held turn lease on a session, returned by ``begin_session_turn``."""

    tenant: str
    session_id: str
    token: str
    latest_response_id: str | None
    deployment: str | None
    lease_expires_at: float
    #: Ids of the items deleted from the session's conversation (``hide_item``): its history
    #: without them is the next turn's context.
    hidden: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Conversation:
    """A session seen as a conversation (OpenAI's Conversations API). Times are Unix seconds."""

    id: str
    tenant: str
    created_at: float
    updated_at: float
    metadata: dict[str, str]
    #: The response whose chain holds the conversation's items (None: no items yet).
    latest_response_id: str | None
    #: Ids of the items deleted from the conversation (its chain keeps them).
    hidden: tuple[str, ...]

    def to_wire(self) -> dict[str, Any]:
        """The ``conversation`` object."""
        return {
            "id": self.id,
            "object": "conversation",
            "created_at": int(self.created_at),
            "metadata": self.metadata,
        }


JobAction = Literal["lease", "hold", "finish"]


@dataclass(frozen=True, slots=True)
class JobWrite:
    """What a save of a background response does to its lease (``SaveArgs.job``), in the save's
    transaction: ``lease`` takes it (the queued save: a new job row owned by this process, with
    the ``request`` to run it again and the session lease it holds); ``hold`` saves only while
    ``token`` still holds it; ``finish`` too, and ends the job (the final save). Without the
    lease a save raises ``LeaseLost`` and writes nothing."""

    token: str
    action: JobAction
    lease_seconds: float = 30.0
    request: dict[str, Any] | None = None
    session_token: str | None = None


@dataclass(frozen=True, slots=True)
class BackgroundJob:
    """A background response this process holds the lease of (``claim_background``): what is
    needed to run it again and what its earlier attempts did."""

    response_id: str
    tenant: str
    token: str
    attempts: int  # this one included: 2 is the first attempt after a takeover
    request: dict[str, Any]
    session: SessionTurn | None  # the session lease it holds, taken over with it
    session_lost: bool  # it held a session lease that is gone (expired and taken by another turn)
    delivered: bool  # some of its output reached a client
    effects: bool  # a tool with side effects (an MCP call) ran or may have run


@dataclass(frozen=True, slots=True)
class JobProgress:
    """A background response as a follower on any node reads it (``background_progress``)."""

    status: str
    #: The running attempt's number and events so far; None once it has no job row (it ended,
    #: or it was not leased: an older orgate's, or one made without a store).
    attempts: int | None
    events: bytes | None
    delivered: bool


@dataclass(frozen=True, slots=True)
class StoredReview:
    """One entry of the review queue as stored: the JSON columns as JSON text (the review
    queue, ``structured/review.py``, encodes and reads them)."""

    id: str
    tenant: str
    created_at: float
    status: ReviewStatus
    model: str
    format_name: str
    mode: str
    stage: str
    errors: str
    schema: str | None
    request: str
    attempts: str
    response_id: str | None = None
    resolution: str | None = None
    resolved_at: float | None = None
    note: str | None = None


#: The columns of ``review_entries``, in ``StoredReview``'s order.
REVIEW_COLUMNS = (
    "id, tenant, created_at, status, model, format_name, mode, stage, errors, schema, request, "
    "attempts, response_id, resolution, resolved_at, note"
)


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A process that serves (or served) from this store, as the console's node list shows it."""

    owner_id: str
    started_at: float
    heartbeat_at: float
    stopped_at: float | None
    version: str | None
    address: str | None
    metrics: bytes | None  # its latest metrics snapshot (JSON), ``write_metrics``
    metrics_at: float | None
    background: int  # background responses it holds the lease of


@dataclass(frozen=True, slots=True)
class ApprovalClaim:
    """Who consumed an MCP approval request: the response that acts on it, since when, and (once
    its call ended) the ``outcome``: the ``mcp_call``'s ``output`` and ``error``."""

    approval_request_id: str
    response_id: str
    claimed_at: float
    outcome: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counts for ``orgate store stats``."""

    backend: str
    location: str
    schema_version: int
    responses: int
    by_status: dict[str, int]
    items: int
    sessions: int
    events: int
    oldest_created_at: float | None
    newest_created_at: float | None
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- helpers


def claim_of(approval_request_id: str, claimant: str, row: Sequence[Any]) -> ApprovalClaim | None:
    """What ``claim_approval`` returns from the stored claim ``(response_id, claimed_at,
    outcome)`` that a claim by ``claimant`` found: None when it is the claimant's own."""
    if row[0] == claimant:
        return None
    outcome = orjson.loads(row[2]) if row[2] is not None else None
    return ApprovalClaim(approval_request_id, row[0], row[1], outcome)


def encode_cursor(*parts: str | int | float) -> str:
    """An opaque listing cursor (URL-safe) holding a page's last sort key."""
    text = "\x1f".join(repr(part) if isinstance(part, float) else str(part) for part in parts)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, count: int) -> list[str]:
    """The ``count`` parts of an ``encode_cursor`` string; ``ValueError`` when it is not one."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        raise ValueError("cursor is not one this store made") from None
    parts = text.split("\x1f")
    if len(parts) != count:
        raise ValueError("cursor is not one this store made")
    return parts


def filter_terms(where: ResponseFilter) -> list[tuple[str, str]]:
    """(column, value) pairs a listing must match, in one order for every backend."""
    terms = [("tenant", where.tenant), ("status", where.status), ("model", where.model)]
    terms.append(("session_id", where.session_id))
    return [(column, value) for column, value in terms if value is not None]


#: Identifies this process (pids are reused, e.g. by a restarted container).
_PROCESS_TOKEN = uuid.uuid4().hex[:8]


def new_owner_id() -> str:
    """An id for one store instance: ``host:pid:process-token:instance-token``."""
    return f"{socket.gethostname()}:{os.getpid()}:{_PROCESS_TOKEN}:{uuid.uuid4().hex[:8]}"


def owner_is_dead(owner: str) -> bool | None:
    """Decide from the id alone whether an owner's process is gone.

    True when it ran on this host under a pid that no longer exists, or under our
    pid in an earlier process (a restarted container reuses pids); False for this
    process; None when it cannot be told from here (another host: use heartbeats).
    """
    host, pid_text, process, *_ = [*owner.split(":"), "", "", ""]
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    if pid == os.getpid():
        return process != _PROCESS_TOKEN
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return None
    return None


def live_owners(
    owners: Iterable[tuple[str, float, float | None]], me: str, now: float, stale_after: float
) -> set[str]:
    """The owners of ``(owner_id, heartbeat_at, stopped_at)`` rows that count as alive.

    ``me`` always does; another is alive while not stopped, heartbeating within
    ``stale_after`` seconds and not known dead (``owner_is_dead``).
    """
    return {
        owner
        for owner, beat, stopped in owners
        if owner == me
        or (stopped is None and beat > now - stale_after and owner_is_dead(owner) is not True)
    }


#: Derived positions of output items start here; input items count from 0.
OUTPUT_POSITIONS = 0x800000
_DERIVED_PREFIXES = frozenset(
    {"msg", "item", "fc", "rs", "mcpl", "mcp", "mcpr"}
)  # mcp*: MCP items (docs/mcp.md)


def derived_item_id(prefix: str, response_id: str, position: int) -> str:
    """An item id that names its response and position: ``prefix_<response id suffix><6 hex>``.

    The store finds such an item through its response's row, without an index.
    Inputs sent without an id get one (see ``item_id_for``); the response builder
    gives its output items ``derived_item_id(prefix, response_id, OUTPUT_POSITIONS + index)``.
    The response id's 144 random bits keep them unguessable.
    """
    suffix = response_id.partition("_")[2] or response_id
    return f"{prefix}_{suffix}{position:06x}"


def item_id_for(item: dict[str, Any], response_id: str, position: int) -> str:
    """The item's own ``id``, or the id derived from its place among the response's inputs.

    Input items sent without an id (plain messages) get ``msg_…`` / ``item_…`` ids
    that stay the same when a response is saved again.
    """
    own = item.get("id")
    if isinstance(own, str) and own:
        return own
    return derived_item_id(
        "msg" if item.get("type", "message") == "message" else "item", response_id, position
    )


def derived_location(item_id: str) -> tuple[str, int] | None:
    """Where a derived id points: (response id, position), if it is one."""
    prefix, _, rest = item_id.partition("_")
    if prefix not in _DERIVED_PREFIXES or len(rest) < 7:
        return None
    try:
        position = int(rest[-6:], 16)
    except ValueError:
        return None
    return f"resp_{rest[:-6]}", position


def is_derived(item_id: str, response_id: str, position: int) -> bool:
    """True when ``item_id`` is exactly the derived id of that place (findable without an index).

    Exactly: an id that ``derived_location`` only reads as that place (upper-case
    hex, say) is not, and so gets an index row; lookups try both ways.
    """
    prefix, _, rest = item_id.partition("_")
    return (
        prefix in _DERIVED_PREFIXES
        and 0 <= position <= 0xFFFFFF
        and len(response_id) > 5
        and response_id.startswith("resp_")
        and rest == f"{response_id[5:]}{position:06x}"
    )


def with_id(item: dict[str, Any], item_id: str) -> dict[str, Any]:
    """The item with ``id`` set (a copy when it had none)."""
    if item.get("id") == item_id:
        return item
    return {"id": item_id, **item}


def page_of(rows: list[tuple[str, dict[str, Any]]], limit: int) -> ItemsPage:
    """Build an ``ItemsPage`` from up to ``limit + 1`` (id, item) rows."""
    has_more = len(rows) > limit
    rows = rows[:limit]
    data = [with_id(item, item_id) for item_id, item in rows]
    return ItemsPage(
        data=data,
        first_id=rows[0][0] if rows else None,
        last_id=rows[-1][0] if rows else None,
        has_more=has_more,
    )


def check_order(order: str, limit: int) -> None:
    """Validate ``input_items`` paging arguments."""
    if order not in ("asc", "desc"):
        raise ValueError(f"order must be 'asc' or 'desc', not {order!r}")
    if not 1 <= limit <= 100:
        raise ValueError(f"limit must be between 1 and 100, not {limit}")


# --------------------------------------------------------------------------- interface


class LeaseReleases:
    """Session leases whose release failed (the database was unreachable): released again in
    the background, with backoff, until it works or the lease has expired anyway. Without it a
    session whose holder could not release its lease during an outage stays busy (409) for
    the whole lease (10 minutes by default) once the database is back."""

    def __init__(
        self,
        release: Callable[[SessionTurn], Awaitable[object]],
        *,
        first_delay: float = 0.1,
        max_delay: float = 2.0,
    ) -> None:
        self._release = release
        self._first_delay = first_delay
        self._max_delay = max_delay
        self._pending: dict[str, SessionTurn] = {}  # by lease token
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, turn: SessionTurn) -> None:
        """Release ``turn`` later (on the running event loop)."""
        if turn.lease_expires_at <= time.time():
            return
        self._pending[turn.token] = turn
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="orgate-store-lease-release"
            )

    async def _run(self) -> None:
        delay = self._first_delay
        while self._pending:
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._max_delay)
            for token, turn in list(self._pending.items()):
                if turn.lease_expires_at > time.time():
                    try:
                        await self._release(turn)
                    except StoreError as exc:
                        _log.debug("session lease release retry failed: %s", exc)
                        continue
                    _log.info(
                        "released the lease of session %s after a store failure", turn.session_id
                    )
                self._pending.pop(token, None)

    async def close(self) -> None:
        """Stop retrying (a stopped owner's leases are freed by ``recover_interrupted``)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class SaveArgs(NamedTuple):
    """What a save is told besides the response itself: ``ResponseStore.save``'s keywords,
    handed to the backend's ``_save`` as one value."""

    tenant: str
    input_items: Sequence[dict[str, Any]]
    previous_response_id: str | None = None
    session_id: str | None = None
    deployment: str | None = None
    request: dict[str, Any] | None = None
    events: bytes | None = None
    expires_at: float | None = None
    output_items: Sequence[dict[str, Any]] | None = None
    job: JobWrite | None = None


class ResponseStore(abc.ABC):
    """Persistence of responses, their items, sessions and stream events.

    Implementations: ``SqliteStore`` (embedded default) and ``PostgresStore``.
    Obtain one with ``orgate.store.open_store(url)``; it is ready to use (schema
    created or migrated, heartbeat running) and must be closed with ``close()``.
    """

    #: ``"sqlite"`` or ``"postgresql"``.
    backend: str
    #: This process instance's owner id (recorded on the responses it saves).
    owner_id: str
    #: Database round trips made so far (SQLite: statements executed). For tests
    #: and metrics: a turn costs a constant number whatever the chain length.
    query_count: int

    # -- responses

    async def save(
        self,
        response: dict[str, Any],
        *,
        tenant: str,
        input_items: Sequence[dict[str, Any]],
        previous_response_id: str | None = None,
        session_id: str | None = None,
        deployment: str | None = None,
        request: dict[str, Any] | None = None,
        events: bytes | None = None,
        expires_at: float | None = None,
        output_items: Sequence[dict[str, Any]] | None = None,
        job: JobWrite | None = None,
    ) -> None:
        """Insert or update (by ``response["id"]``) a response in one transaction.

        ``input_items`` are this response's own new input items, already resolved
        (no ``item_reference``); its output items are ``output_items`` when given
        (what the model produced, e.g. with provider-extension items the spec's
        ``output`` leaves out), else ``response["output"]``.
        Saving again replaces the status, body, output items and events (background
        progress). With ``session_id`` the session's latest response becomes this one.
        Raises ``UnknownResponse`` when ``previous_response_id`` is not the tenant's
        and ``ResponseConflict`` when the id belongs to another tenant. ``job``: the save of a
        background response takes, keeps or ends its lease in the same transaction
        (``JobWrite``); ``LeaseLost`` when it is not this process's any more.
        """
        args = SaveArgs(
            tenant,
            input_items,
            previous_response_id,
            session_id,
            deployment,
            request,
            events,
            expires_at,
            output_items,
            job,
        )
        await self._save(response, args)

    @abc.abstractmethod
    async def _save(self, response: dict[str, Any], args: SaveArgs) -> None:
        """``save`` in this backend (one transaction)."""

    @abc.abstractmethod
    async def get(self, response_id: str, tenant: str) -> StoredResponse | None:
        """The response, or None when missing, expired or another tenant's."""

    @abc.abstractmethod
    async def delete(self, response_id: str, tenant: str) -> bool:
        """Delete a response with its items and events; True when it existed.

        Continuations of a deleted response (and of its descendants) have no context.
        """

    @abc.abstractmethod
    async def context(self, response_id: str, tenant: str) -> list[dict[str, Any]] | None:
        """Every input and output item of the chain ending at this response, in order.

        This is the model input that precedes the new input of a continuation. None
        when the response, or any ancestor, is missing, expired or another tenant's.
        Costs one round trip whatever the chain length.
        """

    @abc.abstractmethod
    async def context_items(
        self, response_id: str, tenant: str
    ) -> list[tuple[str, dict[str, Any]]] | None:
        """``context`` with each item's id: ``(id, item)`` pairs (an item stored without an id
        has the one derived from its place, as ``input_items`` lists it). None as for
        ``context``. One round trip."""

    @abc.abstractmethod
    async def chain_tail(self, response_id: str, tenant: str) -> ChainTail | None:
        """The path of the chain ending at this response and the response's own items, with
        their ids (as ``context_items`` gives them). None as for ``context``: every response of
        the path is checked to exist, be the tenant's and be unexpired. One round trip; the
        items of the other responses are not read."""

    @abc.abstractmethod
    async def link_items(
        self, response_ids: Sequence[str], tenant: str
    ) -> list[list[tuple[str, dict[str, Any]]]] | None:
        """The own items of each of these responses (with their ids), in the order given. None
        when any of them is missing, expired or another tenant's. One round trip."""

    @abc.abstractmethod
    async def input_items(
        self,
        response_id: str,
        tenant: str,
        *,
        limit: int = 20,
        order: Order = "desc",
        after: str | None = None,
    ) -> ItemsPage | None:
        """A page of the response's own input items (each with an ``id``).

        ``after`` is an item id: the page starts after it in the chosen order (an id
        that is not among the items gives an empty page). None when no such response.
        """

    @abc.abstractmethod
    async def get_item(self, item_id: str, tenant: str) -> dict[str, Any] | None:
        """An item by id (for ``item_reference``): its first stored occurrence."""

    @abc.abstractmethod
    async def events(self, response_id: str, tenant: str) -> bytes | None:
        """The stored SSE events blob of a response, if one was saved."""

    @abc.abstractmethod
    async def list_responses(
        self, where: ResponseFilter, *, limit: int = 50, cursor: str | None = None
    ) -> ResponsesPage:
        """Live (unexpired) responses matching ``where``, newest first, ``limit`` at most.

        Keyset pagination: ``cursor`` is a page's ``next_cursor`` (opaque); no page
        costs more than its rows plus the ones the filter skips. Adds no index: the
        listing walks an order every save already maintains. Raises ``ValueError``
        for a cursor this store did not make.
        """

    # -- background mode

    @abc.abstractmethod
    async def request_cancel(self, response_id: str, tenant: str) -> bool:
        """Raise the cancel flag of a response; True if found."""

    @abc.abstractmethod
    async def cancel_requested(self, response_id: str, tenant: str) -> bool:
        """Whether cancel was requested (False when not found)."""

    @abc.abstractmethod
    async def heartbeat(self) -> None:
        """Record that this process is alive (done periodically by the store itself)."""

    @abc.abstractmethod
    async def recover_interrupted(self, *, stale_after: float = 30.0) -> list[str]:
        """Mark ``failed`` the queued/in-progress responses whose owner process is dead.

        An owner is dead when it closed its store, when its last heartbeat is older
        than ``stale_after`` seconds, or when it ran on this host under a pid that no
        longer exists (or that is now ours). Responses owned by live processes,
        including this one, are untouched, and so are leased background responses (and the
        session leases they hold): another process takes them over (``claim_background``).
        Returns the ids marked failed.
        """

    # -- durable background responses (docs/store.md#background-responses)

    @abc.abstractmethod
    async def renew_background(self, *, lease_seconds: float) -> set[str]:
        """Extend the lease of every background response this process holds; returns their
        ids (a response missing from them was taken over by another process, or ended)."""

    @abc.abstractmethod
    async def claim_background(self, *, lease_seconds: float) -> BackgroundJob | None:
        """Take over one background response whose lease expired (or whose owner is known
        dead: stopped, or a process of this host that is gone), with the session lease it
        holds; None when there is none. Atomic across processes and machines: of two claims
        at once, one gets it; its events so far are dropped (an attempt starts them again)."""

    @abc.abstractmethod
    async def mark_background(
        self,
        response_id: str,
        what: Literal["delivered", "effects"],
        *,
        token: str | None = None,
        attempts: int | None = None,
    ) -> bool:
        """Record that its output reached a client (``delivered``) or that a tool with side
        effects is about to run (``effects``), before it happens: a takeover then fails it
        rather than run it again. Only while ``token`` holds its lease (the process running it),
        or while ``attempts`` is still its attempt (a follower on another node); False when
        not (taken over, or ended)."""

    @abc.abstractmethod
    async def write_background_events(self, response_id: str, token: str, events: bytes) -> bool:
        """Keep a running background response's events so far, for followers on other nodes;
        False when ``token`` no longer holds its lease."""

    @abc.abstractmethod
    async def background_progress(self, response_id: str, tenant: str) -> JobProgress | None:
        """Its status, and its running attempt's events (None when no such response)."""

    @abc.abstractmethod
    async def end_background(
        self, job: BackgroundJob, status: str, error: dict[str, Any] | None
    ) -> bool:
        """End a claimed job without running it: the response stored with ``status`` (and
        ``error``), the job row and its session lease released. False when the lease is lost."""

    # -- the review queue (docs/structured-output.md#the-review-queue)

    @abc.abstractmethod
    async def add_reviews(self, entries: Sequence[StoredReview]) -> int:
        """Store entries (an id stored already is left as it is); the number added."""

    @abc.abstractmethod
    async def list_reviews(
        self, status: str | None, tenant: str | None, *, limit: int, offset: int
    ) -> list[StoredReview]:
        """Entries, oldest first; None: any status, every tenant."""

    @abc.abstractmethod
    async def count_reviews(self, status: str | None, tenant: str | None) -> int:
        """How many entries ``list_reviews`` would find."""

    @abc.abstractmethod
    async def get_review(
        self, review_id: str | None, tenant: str | None, *, response_id: str | None = None
    ) -> StoredReview | None:
        """The entry by id (or the one of ``response_id``); None when missing or another
        tenant's (``tenant`` given)."""

    @abc.abstractmethod
    async def finish_review(
        self,
        review_id: str,
        status: str,
        resolution: str | None,
        note: str | None,
        tenant: str | None,
    ) -> bool:
        """Resolve or discard a pending entry (``tenant`` given: only its own); False when it
        is not pending or not found."""

    # -- the nodes (the console's cluster view)

    @abc.abstractmethod
    async def describe_node(self, *, version: str, address: str | None) -> None:
        """Record what this process is (its version, the address it serves on)."""

    @abc.abstractmethod
    async def write_metrics(self, snapshot: bytes) -> None:
        """Keep this process's latest metrics snapshot (JSON) for the other nodes' consoles."""

    @abc.abstractmethod
    async def nodes(self) -> list[NodeRecord]:
        """Every process known to the store (pruned once long dead), oldest first."""

    # -- sessions

    @abc.abstractmethod
    async def begin_session_turn(
        self, tenant: str, session_id: str, *, lease_seconds: float = 600.0, create: bool = True
    ) -> SessionTurn:
        """Claim the session's turn: returns its latest response, or raises ``SessionBusy``.

        The claim is atomic across processes; it does not wait. The lease ends with
        ``end_session_turn`` or after ``lease_seconds`` (a crashed holder). A session that
        does not exist is created, unless ``create`` is false: then ``UnknownSession``
        (a conversation must be created first).
        """

    async def end_session_turn(self, turn: SessionTurn) -> None:
        """Release a lease taken by ``begin_session_turn`` (no-op if it expired and was retaken).

        When the database cannot be reached the release is retried in the background
        (``lease_releases``) and the ``StoreError`` is raised all the same.
        """
        try:
            await self._end_turn(turn)
        except StoreError:
            self.lease_releases.add(turn)  # e.g. a restart, a full disk: retried until it works
            raise

    @abc.abstractmethod
    async def _end_turn(self, turn: SessionTurn) -> None:
        """One attempt at releasing ``turn``'s lease."""

    # -- conversations: sessions seen through OpenAI's Conversations API

    @abc.abstractmethod
    async def create_conversation(
        self, tenant: str, conversation_id: str, *, metadata: dict[str, str]
    ) -> Conversation:
        """A new, empty session named ``conversation_id``; ``StoreError`` if the name is taken."""

    @abc.abstractmethod
    async def get_conversation(self, conversation_id: str, tenant: str) -> Conversation | None:
        """The session as a conversation, or None when the tenant has no such session."""

    @abc.abstractmethod
    async def update_conversation(
        self, conversation_id: str, tenant: str, *, metadata: dict[str, str]
    ) -> Conversation | None:
        """Replace the conversation's metadata; None when the tenant has no such session."""

    @abc.abstractmethod
    async def delete_conversation(self, conversation_id: str, tenant: str) -> bool:
        """Delete the session (its responses stay); True when it existed. ``SessionBusy`` while
        a turn holds its lease (the turn's save would bring it back)."""

    @abc.abstractmethod
    async def hide_item(self, conversation_id: str, tenant: str, item_id: str) -> bool:
        """Delete an item from the conversation: its id joins the session's ``hidden`` ids (the
        responses that hold it keep it). False when the tenant has no such session."""

    @functools.cached_property
    def lease_releases(self) -> LeaseReleases:
        """The leases whose release failed, released again in the background
        (closed by ``close``)."""
        return LeaseReleases(self._end_turn)

    # -- MCP approvals (docs/mcp.md)

    @abc.abstractmethod
    async def claim_approval(
        self, tenant: str, approval_request_id: str, response_id: str
    ) -> ApprovalClaim | None:
        """Consume an approval request for ``response_id``: None when this call consumed it (or
        ``response_id`` already had: a retried claim), else the claim that did. Atomic across
        processes and machines: of two claims at once, exactly one gets None."""

    @abc.abstractmethod
    async def settle_approval(
        self, tenant: str, approval_request_id: str, response_id: str, outcome: dict[str, Any]
    ) -> None:
        """Record how the call of ``response_id``'s claim ended (what a replay is given)."""

    @abc.abstractmethod
    async def release_approval(
        self, tenant: str, approval_request_id: str, response_id: str
    ) -> None:
        """Drop ``response_id``'s unsettled claim: nothing ran, the next answer may act."""

    # -- console sessions and sign-ins (docs/console.md)

    @abc.abstractmethod
    async def revoke_console_session(self, session_id: str, expires_at: float) -> None:
        """Sign-out: the session is refused by every process until ``expires_at`` (when it would
        have expired anyway); revocations already past their expiry are dropped."""

    @abc.abstractmethod
    async def console_session_revoked(self, session_id: str) -> bool:
        """Whether the session was signed out."""

    @abc.abstractmethod
    async def signin_failed(
        self, subjects: Sequence[str], *, now: float, forget_after: float
    ) -> list[int]:
        """Count one failed sign-in against each subject (a client address, a key fingerprint):
        their failures so far, in order. A subject's count starts again after ``forget_after``
        seconds without a failure; subjects idle that long (and not blocked) are dropped."""

    @abc.abstractmethod
    async def signin_block(self, subject: str, until: float) -> None:
        """Refuse ``subject``'s sign-ins until ``until`` (never shortens a block)."""

    @abc.abstractmethod
    async def signin_blocked_until(self, subjects: Sequence[str]) -> float:
        """The end of the latest block of any of ``subjects`` (0 when none is blocked)."""

    # -- retention and lifecycle

    @abc.abstractmethod
    async def prune(self, *, older_than: float) -> int:
        """Delete responses created more than ``older_than`` seconds ago, and expired ones.

        Also drops their items and events, idle sessions last used before the cutoff
        and owner records of long-dead processes. Returns the number of responses deleted.
        """

    @abc.abstractmethod
    async def count_prunable(self, *, older_than: float) -> int:
        """How many responses ``prune(older_than=...)`` would delete now (nothing is deleted)."""

    @abc.abstractmethod
    async def stats(self) -> StoreStats:
        """Counts of responses (by status), items, sessions and events."""

    # -- tenants

    @abc.abstractmethod
    async def tenants(self) -> dict[str, int]:
        """Every tenant that holds responses or sessions, with its number of responses."""

    @abc.abstractmethod
    async def rename_tenant(self, old: str, new: str) -> int:
        """Give tenant ``old``'s responses, items, events and sessions to ``new``, in one
        transaction; returns the number of responses moved. ``StoreError`` when ``new``
        already holds data (two tenants' data are never merged) or ``old`` has a response
        in progress (a server still running for it)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop the heartbeat, mark this owner stopped, and close connections."""
