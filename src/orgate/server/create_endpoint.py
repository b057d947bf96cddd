"""``POST /v1/responses`` as a plain ASGI app: the hot path, kept free of framework layers.

The app factory routes this one method+path straight here (and also
registers it as a Starlette route, so method errors and the WebSocket route
on the same path behave as everywhere else). It takes the caller the edge
authenticated (``auth.caller_of``), reads and checks the body, calls the
service and sends: one JSON body, or SSE frames.
Frames produced while the upstream's bytes are being decoded are sent
together: one ``send`` per upstream read instead of one per event.
A client that disconnects cancels the response (and with it the upstream call);
the connection is watched from ``WATCH_AFTER`` seconds into a request, so a fast
answer pays for no watcher task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from orgate.engine.input_gate import split_namespaced
from orgate.engine.padding import pads
from orgate.engine.request_body import parse_body
from orgate.engine.service import Caller, shutdown_error
from orgate.protocol.errors import ApiError, ErrorCode, internal, invalid_value
from orgate.server.auth import caller_of
from orgate.server.background_jobs import rerun_record
from orgate.server.body import (
    DeferredSchema,
    body_decoder,
    body_timeout_error,
    check_body_headers,
    check_deferred_schemas,
    check_request_limits,
    parse_json,
    receive_body,
)
from orgate.server.disconnect import DisconnectWatch
from orgate.server.errors import encode_headers, send_error, send_json
from orgate.server.header_values import has_control
from orgate.server.request_state import STATE_KEY, RequestState
from orgate.server.sse import DONE, frame, openai_frame, then_done
from orgate.structured import BODY_FIELD, BUDGET_HEADER, BudgetOverride

if TYPE_CHECKING:
    from orgate.server.services import Services

log = logging.getLogger("orgate.server")

Scope = dict[str, Any]
#: The longest session key (``X-Session-Id`` or ``user``) taken: it comes back in a header.
MAX_SESSION_KEY = 256
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def _headers(scope: Scope, names: Mapping[bytes, str]) -> dict[str, str]:
    """The request headers the endpoint reads (``names``: raw name → str name), decoded; of a
    repeated one, the last (a client's dozen others are never decoded)."""
    raw = dict(scope["headers"])
    return {names[key]: raw[key].decode("latin-1") for key in raw.keys() & names.keys()}


async def send_sse(
    send: Any, chunks: AsyncIterator[bytes], extra: Mapping[str, str] | None, watch: DisconnectWatch
) -> None:
    """Send an SSE body chunk by chunk; a client disconnect cancels the producer
    (and the upstream call).

    The chunks are pumped in the request's own task; the request's ``DisconnectWatch``
    cancels that task when the client goes
    away, which ends the producer where it waits (its ``finally`` persists the
    response as failed and closes the upstream). The producer is closed here in
    any case, also when the cancellation hit a ``send`` (a slow reader that left):
    its upstream call and concurrency slot are freed now, not at garbage collection.
    """
    try:
        headers = list(_SSE_HEADERS)
        if extra:
            headers += encode_headers(extra)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        last = False
        async for chunk in chunks:
            last = chunk.endswith(DONE)  # the final chunk also ends the body: one write fewer
            await send({"type": "http.response.body", "body": chunk, "more_body": not last})
        if not last:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    except asyncio.CancelledError:
        if not watch.absorb():
            raise  # we are being cancelled ourselves
        # the client went away: the stream ends here, quietly
    except Exception as error:  # noqa: BLE001 - the producer ends streams cleanly; this is a bug or a dead socket
        log.error("SSE stream ended by %r", error)
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception as error:  # noqa: BLE001 - closing must not mask how the stream ended
                log.error("closing an SSE producer failed: %r", error)


class CreateResponse:
    """The ASGI app of ``POST /v1/responses``."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.limits = services.settings.limits
        self.session_header = services.settings.sessions.header.lower()
        self.budget_header = BUDGET_HEADER.lower()
        read = (
            "content-type",
            "content-encoding",
            "content-length",
            self.session_header,
            self.budget_header,
        )
        self.header_names = {name.encode("latin-1"): name for name in read}
        endpoint = services.settings.endpoints.responses
        self.frame = openai_frame if endpoint.event_names == "openai" else frame
        self.obfuscation = endpoint.obfuscation  # for a request whose stream_options do not say

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        try:
            await self._handle(scope, receive, send)
        except ApiError as error:
            await send_error(send, error)
        except Exception:  # noqa: BLE001 - the one place a bug becomes a clean 500
            log.exception("unhandled error on POST /v1/responses")
            await send_error(send, internal())

    async def _handle(self, scope: Scope, receive: Any, send: Any) -> None:
        state: RequestState = scope[STATE_KEY]
        caller = caller_of(scope)
        headers = _headers(scope, self.header_names)
        media = check_body_headers(headers, self.limits)
        encoding = headers.get("content-encoding")
        decoder = body_decoder(encoding, self.limits) if encoding else None
        watch = DisconnectWatch(
            receive, body_timeout=self.limits.body_timeout
        )  # one timer for both
        try:
            try:
                raw = await receive_body(receive, self.limits, decoder)
            except asyncio.CancelledError:
                if watch.body_timed_out():
                    raise body_timeout_error(self.limits) from None
                raise
            if raw is None:
                state.client_gone = True  # metrics and the access log say 499
                return  # the client went away before sending its request
            watch.body_read()
            await self._respond(raw, headers, media, caller, state, send, watch)
        except asyncio.CancelledError:
            if watch.absorb():
                state.client_gone = True
                # the client went away before the answer: the turn was cancelled where it waited
                return
            if not state.response_started:
                # The server cancels the request (shutdown past its drain timeout):
                # answer rather than cut.
                await send_error(send, shutdown_error("request"))
            raise
        finally:
            watch.stop()

    async def _respond(
        self,
        raw: bytes,
        headers: dict[str, str],
        media: str,
        caller: Caller,
        state: RequestState,
        send: Any,
        watch: DisconnectWatch,
    ) -> None:
        services = self.services
        data = parse_json(raw, media, self.limits)
        warnings: list[str] = []
        budget = None
        if isinstance(data, dict):
            state.note_model(data.get("model"))
            deferred: list[DeferredSchema] = []
            check_request_limits(data, self.limits, deferred)
            if deferred:  # a large schema never seen: costed off the event loop
                await asyncio.to_thread(check_deferred_schemas, deferred, self.limits)
            if BODY_FIELD in data or self.budget_header in headers:
                budget = structured_budget(data, headers.get(self.budget_header))
            if "input" in data:
                data["input"] = split_namespaced(
                    data["input"], services.settings.gate.policy, warnings
                )
        body = parse_body(data)
        session_id = self._session(headers, body)
        padded = bool(body.stream) and pads(body.stream_options, self.obfuscation)
        rerun = None
        if body.background and isinstance(data, dict):  # kept with its lease: run again elsewhere
            rerun = rerun_record(data, caller, session_id, budget, padded)
        stream = await services.responses.create(
            body, caller, warnings, budget=budget, session_id=session_id, rerun=rerun
        )
        if padded:
            stream.builder.padded = True
        if body.background:
            services.background.start(stream, self.frame)
            if body.stream:
                await send_sse(
                    send,
                    then_done(services.background.subscribe(stream.response_id)),
                    stream.headers,
                    watch,
                )
            else:
                await send_json(send, 200, orjson.dumps(stream.builder.snapshot()), stream.headers)
            return
        watch.follow(stream)
        if body.stream:
            await send_sse(send, stream.frames(self.frame, DONE), stream.headers, watch)
            return
        response = await stream.final()
        if stream.error is not None:
            error = stream.error
            error.headers = {**stream.headers, **error.headers}
            await send_error(send, error)
            return
        await send_json(send, 200, orjson.dumps(response), stream.headers)

    def _session(self, headers: Mapping[str, str], body: Any) -> str | None:
        """The session key: the configured header, else the body's ``user`` (scoped per API key by
        the store). It is echoed in ``X-Session-Id``: one a header cannot carry as it is is
        refused here, before the model is asked."""
        value = headers.get(self.session_header)
        if value:
            return session_key(value, self.services.settings.sessions.header, "header")
        if self.services.settings.sessions.use_user_field and body.model_extra:
            user = body.model_extra.get("user")
            if isinstance(user, str) and user:
                return session_key(user, "user", "field")
        return None


def session_key(value: str, param: str, where: str) -> str:
    """``value`` as a session key, or a 400 naming ``param``: at most 256 characters, none of
    them a control character (the key comes back in ``X-Session-Id``)."""
    if len(value) > MAX_SESSION_KEY:
        raise invalid_value(
            f"The {param} {where} is longer than {MAX_SESSION_KEY} characters.", param=param
        )
    if has_control(value):
        raise invalid_value(
            f"The {param} {where} holds a control character, which a session key cannot hold: "
            "the key is echoed in the X-Session-Id response header.",
            param=param,
        )
    return value


def structured_budget(data: Any, header: str | None) -> BudgetOverride | None:
    """The safety-net budget override: body field ``structured_budget``
    (removed here) and/or the header."""
    from_body = None
    if isinstance(data, dict) and BODY_FIELD in data:
        raw = data.pop(BODY_FIELD)
        if raw is not None and not isinstance(raw, dict):  # null = not given
            raise ApiError.of(
                ErrorCode.INVALID_STRUCTURED_BUDGET,
                f'\'{BODY_FIELD}\' must be an object like {{"retries": 1, "seconds": 5}}.',
                param=BODY_FIELD,
            )
        from_body = None if raw is None else BudgetOverride.from_mapping(raw)
    from_header = BudgetOverride.from_header(header) if header else None
    if from_body is not None and from_header is not None:
        return from_body.merged(from_header)
    return from_body or from_header
