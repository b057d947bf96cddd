"""MCP approvals acted on at most once: an approval request is consumed by the first response that
acts on it, whatever process or machine serves it.

Before anything of a turn runs, each answered approval (``orgate.mcptools.items.Pending``) is
claimed in the ledger — the response store, shared by every process (``claim_approval``: a
unique key), or ``LocalApprovals`` for a gateway without a store. Then:

- claimed by this response: it acts (runs the call, or tells the model of a denial), and records
  the outcome (``settle_approval``); when nothing ran — the tool was not offered this time, or the
  response ended before the call started — the claim is released for the next answer;
- claimed by another response that recorded its outcome: this one is given that outcome (an
  ``mcp_call`` with the same output or error, ``outcome=replayed`` in the audit line), never a
  second execution. An SDK that retries a request it did not see answered gets what the first
  attempt did, as if it had seen it;
- claimed by another response still acting on it (two at once): a 409
  ``mcp_approval_in_progress`` with ``Retry-After``, before the model is asked; the retry gets the
  recorded outcome. The OpenAI SDKs retry a 409 by themselves;
- claimed by a response that never recorded an outcome and whose time is up (its process died
  during the call): an ``mcp_call`` with an error saying the outcome is unknown. The call may have
  run; it is never run again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from orgate.mcptools.client import protocol_error
from orgate.mcptools.items import Pending
from orgate.protocol.errors import ApiError, ErrorCode
from orgate.store.base import ApprovalClaim, StoreError

log = logging.getLogger("orgate.mcp")

#: JSON-RPC "server error": the call's outcome is unknown (the code of a failed call).
UNKNOWN_OUTCOME_CODE = -32000
#: Seconds a client is told to wait before retrying an answer another response is acting on.
RETRY_AFTER = 2
#: Claims a gateway without a store remembers (the bound caps its memory).
MAX_LOCAL_CLAIMS = 100_000


class ApprovalLedger(Protocol):
    """Where approval claims live (``ResponseStore`` implements it)."""

    async def claim_approval(
        self, tenant: str, approval_request_id: str, response_id: str
    ) -> ApprovalClaim | None: ...

    async def settle_approval(
        self, tenant: str, approval_request_id: str, response_id: str, outcome: dict[str, Any]
    ) -> None: ...

    async def release_approval(
        self, tenant: str, approval_request_id: str, response_id: str
    ) -> None: ...


class LocalApprovals:
    """The ledger of a gateway without a store: claims held by this process only (a gateway
    without a store cannot continue a stored conversation; an answer comes with its history),
    the latest ``MAX_LOCAL_CLAIMS`` of them."""

    def __init__(self) -> None:
        self._claims: dict[tuple[str, str], ApprovalClaim] = {}

    async def claim_approval(
        self, tenant: str, approval_request_id: str, response_id: str
    ) -> ApprovalClaim | None:
        key = (tenant, approval_request_id)
        claim = self._claims.get(key)
        if claim is None:
            if len(self._claims) >= MAX_LOCAL_CLAIMS:  # the oldest goes (dicts keep order)
                del self._claims[next(iter(self._claims))]
            claim = self._claims[key] = ApprovalClaim(
                approval_request_id, response_id, time.time(), None
            )
        return None if claim.response_id == response_id else claim

    async def settle_approval(
        self, tenant: str, approval_request_id: str, response_id: str, outcome: dict[str, Any]
    ) -> None:
        claim = self._claims.get((tenant, approval_request_id))
        if claim is not None and claim.response_id == response_id:
            self._claims[(tenant, approval_request_id)] = ApprovalClaim(
                approval_request_id, response_id, claim.claimed_at, outcome
            )

    async def release_approval(
        self, tenant: str, approval_request_id: str, response_id: str
    ) -> None:
        claim = self._claims.get((tenant, approval_request_id))
        if claim is not None and claim.response_id == response_id and claim.outcome is None:
            del self._claims[(tenant, approval_request_id)]


@dataclass(frozen=True, slots=True)
class Answer:
    """An answered approval after its claim: ``recorded`` is the outcome another response
    recorded (given, not run again); None when this response acts on it."""

    pending: Pending
    recorded: dict[str, Any] | None


def outcome(output: str | None, error: dict[str, Any] | None) -> dict[str, Any]:
    """What is recorded of a call (and given to a replay): its ``mcp_call`` fields."""
    return {"output": output, "error": error}


def unknown_outcome(claimant: str) -> dict[str, Any]:
    """The outcome of a claim whose response never recorded one (it stopped during the call)."""
    return outcome(
        None,
        protocol_error(
            UNKNOWN_OUTCOME_CODE,
            f"not run again: the response {claimant} took this approval and ended before it "
            "recorded how the call went (the call may have run)",
        ),
    )


def in_progress(answer: Pending, claim: ApprovalClaim) -> ApiError:
    return ApiError.of(
        ErrorCode.MCP_APPROVAL_IN_PROGRESS,
        f"{answer.param}: the approval request '{claim.approval_request_id}' is being acted on by"
        f" the response {claim.response_id}; retry to get its outcome.",
        param=answer.param,
        headers={"Retry-After": str(RETRY_AFTER)},
    )


async def claim_answers(
    ledger: ApprovalLedger,
    answers: list[Pending],
    tenant: str,
    response_id: str,
    lease_of: Callable[[Pending], float],
) -> list[Answer]:
    """Claim every answered approval of a turn (see the module docstring); raises the 409 of one
    that another response is acting on, after releasing the claims it took."""
    claimed: list[Answer] = []
    try:
        for answer in answers:
            claim = await ledger.claim_approval(tenant, answer.request.id, response_id)
            if claim is None:
                claimed.append(Answer(answer, None))
            elif claim.outcome is not None:
                claimed.append(Answer(answer, claim.outcome))
            elif time.time() - claim.claimed_at > lease_of(answer):
                claimed.append(Answer(answer, unknown_outcome(claim.response_id)))
            else:
                raise in_progress(answer, claim)
    except StoreError as exc:
        await _release(ledger, claimed, tenant, response_id)
        log.warning("approval claims failed: %s", exc)
        raise ApiError.of(
            ErrorCode.STORE_UNAVAILABLE,
            "The response store is unavailable; try again shortly.",
            headers={"Retry-After": "1"},
        ) from None
    except BaseException:
        await _release(ledger, claimed, tenant, response_id)
        raise
    return claimed


async def _release(
    ledger: ApprovalLedger, claimed: list[Answer], tenant: str, response_id: str
) -> None:
    """Give back the claims taken before a turn stopped (nothing ran)."""
    for taken in claimed:
        if taken.recorded is None:
            await release_quietly(ledger, tenant, taken.pending.request.id, response_id)


async def release_quietly(
    ledger: ApprovalLedger, tenant: str, approval_request_id: str, response_id: str
) -> None:
    """Release a claim; a store that fails leaves it held, which only delays the next answer
    (409 until the claim's time is up, then the unknown outcome): never a second run."""
    try:
        await ledger.release_approval(tenant, approval_request_id, response_id)
    except StoreError:
        log.warning("could not release the approval claim %s", approval_request_id, exc_info=True)


async def settle_quietly(
    ledger: ApprovalLedger,
    tenant: str,
    approval_request_id: str,
    response_id: str,
    recorded: dict[str, Any],
) -> None:
    """Record a call's outcome; a store that fails leaves the claim unsettled (a replay waits
    for its time, then gets the unknown outcome): never a second run."""
    try:
        await ledger.settle_approval(tenant, approval_request_id, response_id, recorded)
    except StoreError:
        log.warning("could not record the outcome of %s", approval_request_id, exc_info=True)
