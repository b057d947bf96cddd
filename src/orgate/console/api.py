"""The console's JSON endpoints under ``/console/api`` (documented in docs/console.md).

A script can call them too: sign in with ``POST /console/api/session``, keep the
cookie, send the returned ``csrf_token`` as ``X-CSRF-Token`` on POST and DELETE.
Every read is scoped to the session's tenant unless its key is an admin key.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.console import views
from orgate.console.guard import (
    json_response,
    require_change_allowed,
    require_same_origin,
    require_session,
    visible_tenant,
)
from orgate.console.session import COOKIE, ConsoleSession, SessionSigner
from orgate.console.throttle import SignInThrottle, store_unavailable
from orgate.protocol.errors import ApiError, ErrorCode, invalid_value
from orgate.server.body import read_json
from orgate.store import STATUSES, ResponseFilter, StoreError

if TYPE_CHECKING:
    from orgate.server.services import Services

PAGE_LIMIT = 50
MAX_PAGE_LIMIT = 200


def _session_body(signer: SessionSigner, session: ConsoleSession) -> dict[str, Any]:
    return {
        "key_name": session.key_name,
        "tenant": session.tenant,
        "admin": session.admin,
        "expires_at": session.expires_at,
        "csrf_token": signer.csrf_token(session),
    }


def _store(services: Services) -> Any:
    if services.store is None:
        raise ApiError.of(
            ErrorCode.STORE_DISABLED, "The response store is disabled ([store] enabled = false)."
        )
    return services.store


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", str(PAGE_LIMIT))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE_LIMIT:
        raise invalid_value(f"limit must be an integer from 1 to {MAX_PAGE_LIMIT}.", param="limit")
    return int(raw)


def _filter(request: Request, session: ConsoleSession) -> ResponseFilter:
    query = request.query_params
    status = query.get("status") or None
    if status is not None and status not in STATUSES:
        raise invalid_value(f"status must be one of {', '.join(STATUSES)}.", param="status")
    return ResponseFilter(
        tenant=visible_tenant(session, query.get("tenant")),
        status=status,
        model=query.get("model") or None,
        session_id=query.get("session_id") or None,
    )


def session_routes(
    services: Services, signer: SessionSigner, throttle: SignInThrottle
) -> list[BaseRoute]:
    keys = {key.name: key for key in services.keys}
    secure_cookie = (services.settings.server.public_url or "").startswith("https://")

    async def sign_in(request: Request) -> Response:
        require_same_origin(request)
        data = await read_json(request, services.settings.limits)
        token = data.get("key") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token.strip():
            raise ApiError.of(
                ErrorCode.MISSING_API_KEY,
                'Send {"key": "<your API key>"}.',
                param="key",
                status=400,
            )
        address = request.client.host if request.client is not None else "unknown"
        subjects = throttle.subjects(address, token.strip())
        await throttle.check(subjects, address)  # 429 while held up: no key is checked
        try:
            caller = services.auth.check_token(token.strip())
        except ApiError:  # 401 for a wrong key, counted first
            await throttle.failed(subjects, address)
            raise
        throttle.succeeded()
        cookie, session = signer.issue(keys[caller.key_name])
        response = json_response(_session_body(signer, session))
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=int(signer.lifetime),
            path="/console",
            httponly=True,
            samesite="strict",
            secure=secure_cookie,
        )
        return response

    async def current(request: Request) -> Response:
        return json_response(_session_body(signer, await require_session(signer, request)))

    async def sign_out(request: Request) -> Response:
        session = await require_change_allowed(signer, request)
        try:
            await signer.revoke(session)
        except StoreError:
            raise store_unavailable() from None
        response = json_response({"signed_out": True})
        response.delete_cookie(COOKIE, path="/console", httponly=True, samesite="strict")
        return response

    return [
        Route("/console/api/session", sign_in, methods=["POST"]),
        Route("/console/api/session", current, methods=["GET"]),
        Route("/console/api/session", sign_out, methods=["DELETE"]),
    ]


def response_routes(services: Services, signer: SessionSigner) -> list[BaseRoute]:
    async def listing(request: Request) -> Response:
        session = await require_session(signer, request)
        where = _filter(request, session)
        try:
            page = await _store(services).list_responses(
                where, limit=_limit(request), cursor=request.query_params.get("cursor") or None
            )
        except ValueError as exc:
            raise invalid_value(str(exc), param="cursor") from None
        rows = await asyncio.to_thread(lambda: [views.row(record) for record in page.data])
        return json_response({"object": "list", "data": rows, "next_cursor": page.next_cursor})

    async def inspect(request: Request) -> Response:
        session = await require_session(signer, request)
        response_id = request.path_params["response_id"]
        tenant = visible_tenant(session, request.query_params.get("tenant")) or session.tenant
        store = _store(services)
        record = await store.get(response_id, tenant)
        if record is None:
            raise ApiError.of(
                ErrorCode.NOT_FOUND,
                f"No response found with id '{response_id}'.",
                param="response_id",
            )
        page = await store.input_items(response_id, tenant, limit=100, order="asc")
        events = await store.events(response_id, tenant)
        body = views.inspection(record, input_items=page.data if page else [], events=events)
        review = await services.output_checks.review.for_response(response_id, tenant=tenant)
        body["review"] = review.to_dict() if review is not None else None
        return json_response(body)

    return [
        Route("/console/api/responses", listing, methods=["GET"]),
        Route("/console/api/responses/{response_id}", inspect, methods=["GET"]),
    ]
