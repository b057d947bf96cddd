"""Durable background responses, the server's part: what is kept to run one again, and the
takeover of the ones a dead process leaves (docs/store.md#background-responses).

``rerun_record(...)`` is what ``POST /v1/responses`` stores with a background response's lease:
the request body as it was parsed, the caller (key name, tenant, models, admin; never the
key), the session key, the safety-net budget override and whether deltas are padded.
``take_over(services, encode)`` runs while the server does: every third of the lease length
it claims background responses whose lease expired (their process silent past it) or whose
process is known gone, one at a time; each is run again under the lease taken over, or, when
it must not run again (``engine.background.takeover_error``), stored ``failed`` (``cancelled``
when its cancel was asked) without asking the model anything.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orgate.engine.background import takeover_error
from orgate.engine.request_body import parse_body
from orgate.engine.service import Caller, Resume
from orgate.protocol.errors import ApiError
from orgate.store.base import ACTIVE_STATUSES, BackgroundJob, ResponseStore, StoreError
from orgate.structured import BudgetOverride

if TYPE_CHECKING:
    from orgate.server.services import Services

log = logging.getLogger("orgate.background")

Encoder = Callable[[dict[str, Any]], bytes]


def rerun_record(
    data: dict[str, Any],
    caller: Caller,
    session_id: str | None,
    budget: BudgetOverride | None,
    padded: bool,
) -> dict[str, Any]:
    """What another process needs to run a background response again (JSON)."""
    return {
        "body": data,
        "caller": {
            "key_name": caller.key_name,
            "tenant": caller.tenant,
            "models": list(caller.models) if caller.models is not None else None,
            "admin": caller.admin,
        },
        "session_id": session_id,
        "budget": dataclasses.asdict(budget) if budget is not None else None,
        "padded": padded,
    }


def _caller(record: dict[str, Any]) -> Caller:
    who = record["caller"]
    models = who.get("models")
    return Caller(
        who["key_name"],
        who["tenant"],
        tuple(models) if models is not None else None,
        bool(who.get("admin")),
    )


def _budget(record: dict[str, Any]) -> BudgetOverride | None:
    raw = record.get("budget")
    if not raw:
        return None
    return BudgetOverride.from_mapping({k: v for k, v in raw.items() if v is not None})


def _created_at(response: dict[str, Any]) -> int:
    value = response.get("created_at")
    return value if isinstance(value, int) else 0


async def take_over(services: Services, encode: Encoder) -> None:
    """Claim and run (or end) background responses whose process is gone, until cancelled: at
    once (a restarted process takes over what its predecessor left), then every third of the
    lease length."""
    seconds = services.settings.store.background_lease_seconds
    while True:
        store = services.store
        if store is None or services.shutdown.started.is_set():
            return
        try:
            while (job := await store.claim_background(lease_seconds=seconds)) is not None:
                await adopt(services, store, job, encode)
        except StoreError as exc:
            log.warning("could not look for background responses to take over: %s", exc)
        await asyncio.sleep(seconds / 3)


async def adopt(
    services: Services, store: ResponseStore, job: BackgroundJob, encode: Encoder
) -> None:
    """A claimed background response: run again, or ended without running."""
    record = await store.get(job.response_id, job.tenant)
    if record is None or record.status not in ACTIVE_STATUSES:
        await store.end_background(job, "failed", None)  # gone, or ended: the job row only
        return
    if record.cancel_requested:
        await store.end_background(job, "cancelled", None)
        return
    error = takeover_error(job)
    if error is not None:
        log.warning("background response %s not run again: %s", job.response_id, error["message"])
        await store.end_background(job, "failed", error)
        return
    request = job.request
    session = job.session
    if session is not None:  # the response continues what came before it, not itself
        session = dataclasses.replace(session, latest_response_id=record.previous_response_id)
    try:
        body = parse_body(request["body"])
        stream = await services.responses.create(
            body,
            _caller(request),
            budget=_budget(request),
            session_id=request.get("session_id"),
            resume=Resume(job.response_id, _created_at(record.response), job.token, session),
        )
    except ApiError as exc:
        log.warning("background response %s cannot run again: %s", job.response_id, exc.message)
        error = {"code": exc.code or exc.type, "message": exc.message}
        await store.end_background(job, "failed", error)
        return
    stream.builder.padded = bool(request.get("padded"))
    log.info(
        "background response %s taken over (attempt %d): running it again",
        job.response_id,
        job.attempts,
    )
    services.background.start(stream, encode)
