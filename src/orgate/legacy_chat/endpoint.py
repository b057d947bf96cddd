"""``POST /v1/chat/completions``: the HTTP edge of the legacy adapter.

auth → read the body with the server's limits → parse and check the chat
request (chat ``param`` paths) → translate to a ``CreateResponseBody`` → the
same ``ResponsesService`` ``/v1/responses`` uses → translate the events back:
drained into one ``chat.completion`` or streamed as ``chat.completion.chunk``
lines. Errors before the first byte are raised as ``ApiError`` and rendered by
the app's one error handler (the chat error shape is the spec's).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from orgate.engine.padding import pads
from orgate.engine.service import GATE_WARNINGS_HEADER
from orgate.legacy_chat import translate, validate
from orgate.legacy_chat.stream import ChunkTranslator, encode
from orgate.neutral import aclose
from orgate.protocol.errors import SERVER_ERROR, ApiError, ErrorCode
from orgate.server.auth import caller_of
from orgate.server.body import check_schema_bounds, read_json
from orgate.server.disconnect import DisconnectWatch
from orgate.server.errors import error_response
from orgate.server.header_values import header_text
from orgate.server.routes import SSE_HEADERS

if TYPE_CHECKING:
    from orgate.config import LimitSettings
    from orgate.engine.lifecycle import ResponseStream
    from orgate.engine.service import Caller
    from orgate.protocol import CreateResponseBody
    from orgate.server.services import Services

T = TypeVar("T")

Handler = Callable[[Request], Coroutine[Any, Any, Response]]

_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _check_schemas(data: dict[str, Any], limits: LimitSettings) -> None:
    """The bounds of a schema's work (``[limits]`` ``max_schema_*``) on the chat wire's schemas."""
    for index, tool in enumerate(data.get("tools") or ()):
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("parameters"), dict):
            check_schema_bounds(
                function["parameters"], f"tools[{index}].function.parameters", limits
            )
    fmt = data.get("response_format")
    spec = fmt.get("json_schema") if isinstance(fmt, dict) else None
    if isinstance(spec, dict) and isinstance(spec.get("schema"), dict):
        check_schema_bounds(spec["schema"], "response_format.json_schema.schema", limits)


def make_handler(services: Services) -> Handler:
    """The request handler bound to the app's services object."""
    limits = services.settings.limits

    async def chat_completions(request: Request) -> Response:
        caller = caller_of(request.scope)
        data = await read_json(request, limits)
        chat = validate.parse_request(data)
        _check_schemas(data, limits)
        if len(chat.tools or ()) > limits.max_tools:
            raise ApiError.of(
                ErrorCode.TOO_MANY_TOOLS,
                f"'tools' has {len(chat.tools or ())} tools, more than the limit of "
                f"{limits.max_tools} (limits.max_tools).",
                param="tools",
            )
        body, params = translate.translate_request(chat)
        if isinstance(body.input, list) and len(body.input) > limits.max_input_items:
            raise ApiError.of(
                ErrorCode.TOO_MANY_ITEMS,
                f"'messages' translate to {len(body.input)} input items, more than the limit of "
                f"{limits.max_input_items} (limits.max_input_items).",
                param="messages",
            )
        warnings: list[str] = []
        if not chat.stream:
            return await _answer(
                request, services, body, caller, params, warnings, bool(chat.logprobs)
            )
        # Watched until the first event; then Starlette's ``StreamingResponse`` watches the client.
        events = await _watched(
            request, lambda watch: _create(services, body, caller, params, warnings)
        )
        if events is None:
            return Response(status_code=499)  # the client left before the first event
        options = chat.stream_options
        chunks = ChunkTranslator(
            include_usage=bool(options and options.include_usage),
            logprobs=bool(chat.logprobs),
            obfuscation=pads(options, services.settings.endpoints.responses.obfuscation),
            param_map=params.to_chat,
        )
        return StreamingResponse(
            _sse(events, chunks),
            media_type="text/event-stream",
            headers=SSE_HEADERS | _warning_headers(warnings, params),
        )

    return chat_completions


async def _create(
    services: Services,
    body: CreateResponseBody,
    caller: Caller,
    params: translate.ParamMap,
    warnings: list[str],
) -> ResponseStream:
    try:
        return await services.responses.create(body, caller, warnings=warnings)
    except ApiError as err:
        err.param = params.to_chat(err.param)
        raise


async def _watched(request: Request, work: Callable[[DisconnectWatch], Awaitable[T]]) -> T | None:
    """``work`` with the client watched: one that leaves meanwhile cancels it (the turn and its
    upstream call) at once; None then."""
    watch = DisconnectWatch(request.receive)
    try:
        return await work(watch)
    except asyncio.CancelledError:
        if not watch.absorb():
            raise
        return None
    finally:
        watch.stop()


async def _answer(
    request: Request,
    services: Services,
    body: CreateResponseBody,
    caller: Caller,
    params: translate.ParamMap,
    warnings: list[str],
    logprobs: bool,
) -> Response:
    """A non-streamed completion; a client that leaves meanwhile cancels the turn
    (and its upstream call)."""

    async def complete(watch: DisconnectWatch) -> Response:
        events = await _create(services, body, caller, params, warnings)
        watch.follow(events)
        return await _complete(events, params, logprobs)

    response = await _watched(request, complete)
    if response is None:
        return Response(status_code=499)  # nobody is listening any more
    response.headers.update(_warning_headers(warnings, params))
    return response


def _warning_headers(warnings: list[str], params: translate.ParamMap) -> dict[str, str]:
    """The replay gate's warnings (``"<param>: <code>"``), with chat params, as on /v1/responses."""
    if not warnings:
        return {}
    chat = []
    for warning in warnings:
        param, sep, rest = warning.partition(": ")
        chat.append(f"{params.to_chat(param)}{sep}{rest}" if sep else warning)
    return {GATE_WARNINGS_HEADER: header_text(" | ".join(chat))}


async def _complete(events: ResponseStream, params: translate.ParamMap, logprobs: bool) -> Response:
    """Drain the event stream into one ``chat.completion`` (or the error that ended it)."""
    error: ApiError | None = None
    final: dict[str, Any] | None = None
    async for event in events:
        kind = event.get("type")
        if kind == "error" and error is None:
            error = translate.error_from_payload(event.get("error") or {})
        elif kind in _TERMINAL:
            final = event.get("response") or {}
            if kind == "response.failed" and error is None:
                error = translate.error_from_payload(final.get("error") or {})
    # The service keeps the ApiError itself, with its real HTTP status and headers.
    error = getattr(events, "error", None) or error
    if error is not None:
        error.param = params.to_chat(error.param)
        return error_response(error)
    if final is None:
        return error_response(
            ApiError(500, "The response ended without a final event.", type=SERVER_ERROR)
        )
    completion = translate.to_chat_completion(final, logprobs=logprobs)
    return Response(orjson.dumps(completion.model_dump(mode="json")), media_type="application/json")


async def _sse(events: ResponseStream, chunks: ChunkTranslator) -> AsyncIterator[bytes]:
    # Drained to the end even after [DONE]: nothing of the service's work is cut short.
    # If the client goes away, the event iterator is closed at once (releasing the upstream).
    iterator = aiter(events)
    try:
        try:
            async for event in iterator:
                for payload in chunks.feed(event):
                    yield encode(payload)
        except ApiError as err:
            for payload in chunks.fail(err):
                yield encode(payload)
        for payload in chunks.close():
            yield encode(payload)
    finally:
        await aclose(iterator)
