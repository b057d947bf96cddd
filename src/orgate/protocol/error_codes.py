"""The catalogue of error codes: every ``code`` orgate puts in an error body.

One ``ErrorCode`` member per code. The member *is* the wire string (a ``StrEnum``),
and carries what a reader of the error needs: the HTTP status and error ``type``
the code comes with, when orgate sends it, and what the client should do. The
named constructors in ``errors.py`` build ``ApiError``s from it; ``docs/errors.md``
and the OpenAPI document's error responses are generated from it. This module
imports nothing of orgate.
"""

from __future__ import annotations

from enum import StrEnum

# Error ``type`` values used by the spec / the OpenAI reference API.
INVALID_REQUEST = "invalid_request_error"
AUTHENTICATION = "authentication_error"
PERMISSION = "permission_error"
NOT_FOUND = "not_found_error"
RATE_LIMIT = "rate_limit_error"
SERVER_ERROR = "server_error"
MODEL_ERROR = "model_error"

# The class body below has members named like these two types: it refers to them by these names.
_SERVER = SERVER_ERROR
_MODEL = MODEL_ERROR


class ErrorCode(StrEnum):
    """An error code, with the status, type, cause and client action that go with it.

    ``status`` and ``type`` are what the code is sent with; a few sites send another
    status for the same code (an upstream's own 501, say) and pass it explicitly.
    """

    status: int
    type: str
    when: str
    action: str

    def __new__(cls, value: str, status: int, type_: str, when: str, action: str) -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.status = status
        member.type = type_
        member.when = when
        member.action = action
        return member

    # -- the request body and its parameters (400 unless said) -----------------------------
    INVALID_JSON = (
        "invalid_json",
        400,
        INVALID_REQUEST,
        "The body is empty or is not valid JSON.",
        "Send one JSON object.",
    )
    DUPLICATE_KEY = (
        "duplicate_key",
        400,
        INVALID_REQUEST,
        "A JSON object in the body has the same key twice.",
        "Send each key once.",
    )
    INVALID_TYPE = (
        "invalid_type",
        400,
        INVALID_REQUEST,
        "A parameter (or the body) has the wrong JSON type.",
        "Fix the parameter that `param` names.",
    )
    INVALID_VALUE = (
        "invalid_value",
        400,
        INVALID_REQUEST,
        "A parameter has a value orgate does not accept.",
        "Fix the parameter that `param` names; the message says what is allowed.",
    )
    MISSING_REQUIRED_PARAMETER = (
        "missing_required_parameter",
        400,
        INVALID_REQUEST,
        "A required parameter is missing.",
        "Add the parameter that `param` names.",
    )
    UNKNOWN_PARAMETER = (
        "unknown_parameter",
        400,
        INVALID_REQUEST,
        "The body has a parameter the endpoint does not define.",
        "Remove it, or check its spelling.",
    )
    TRANSLATION_REFUSED = (
        "translation_refused",
        400,
        INVALID_REQUEST,
        "The request needs a translation the deployment's `[translation] refuse` policy "
        "names (a tool, item or field the model's upstream cannot take): the message and "
        "`param` name it, and docs/translation.md its code.",
        "Remove what `param` names, or use a model whose upstream takes it.",
    )
    MUTUALLY_EXCLUSIVE_PARAMETERS = (
        "mutually_exclusive_parameters",
        400,
        INVALID_REQUEST,
        "Two parameters that cannot be used together, e.g. `previous_response_id` and "
        "`conversation` (OpenAI's code, message and `param: null`).",
        "Send one of them.",
    )
    UNKNOWN_EVENT_TYPE = (
        "unknown_event_type",
        400,
        INVALID_REQUEST,
        "A WebSocket message's `type` is not `response.create`.",
        "Send `response.create` messages only.",
    )
    STRING_ABOVE_MAX_LENGTH = (
        "string_above_max_length",
        400,
        INVALID_REQUEST,
        "A Chat Completions string parameter is longer than OpenAI allows.",
        "Shorten the value that `param` names.",
    )
    UNSUPPORTED_PARAMETER = (
        "unsupported_parameter",
        400,
        INVALID_REQUEST,
        "The model (or its upstream) cannot honour a parameter.",
        "Leave the parameter out, or use a model that supports it.",
    )
    UNSUPPORTED_CONTENT = (
        "unsupported_content",
        400,
        INVALID_REQUEST,
        "The input holds content (images, files, audio...) the model's upstream cannot take.",
        "Leave that content out, or use a model that takes it.",
    )
    UNSUPPORTED_ITEM = (
        "unsupported_item",
        400,
        INVALID_REQUEST,
        "The input holds an item type the model's upstream (or compaction) cannot take.",
        "Leave the item out, or use a model that takes it.",
    )
    UNSUPPORTED_TOOL = (
        "unsupported_tool",
        400,
        INVALID_REQUEST,
        "A tool's type is not supported by the model's upstream.",
        "Leave the tool out, or use a model that supports it.",
    )
    UNSUPPORTED_TOOL_TYPE = (
        "unsupported_tool_type",
        400,
        INVALID_REQUEST,
        "A hosted tool type that orgate does not run and the upstream cannot run.",
        "Use function tools, or a model whose upstream runs the tool.",
    )
    UNSUPPORTED_TOOL_CHOICE = (
        "unsupported_tool_choice",
        400,
        INVALID_REQUEST,
        "The `tool_choice` cannot be expressed to the model's upstream.",
        "Use `auto`, or another model.",
    )
    INVALID_JSON_SCHEMA = (
        "invalid_json_schema",
        400,
        INVALID_REQUEST,
        "`text.format`'s schema is not a usable JSON Schema.",
        "Fix the schema; the message names the problem.",
    )
    INVALID_TOOL_SCHEMA = (
        "invalid_tool_schema",
        400,
        INVALID_REQUEST,
        "A function tool's `parameters` is not a valid JSON Schema.",
        "Fix the tool's `parameters`.",
    )
    INVALID_DATA_URL = (
        "invalid_data_url",
        400,
        INVALID_REQUEST,
        "An image or file `data:` URL cannot be decoded for the upstream.",
        "Send a well-formed base64 `data:` URL.",
    )
    INVALID_FUNCTION_ARGUMENTS = (
        "invalid_function_arguments",
        400,
        INVALID_REQUEST,
        "A `function_call` item's `arguments` is not a JSON object (the upstream needs one).",
        "Send the call's arguments as a JSON object string.",
    )
    INVALID_STRUCTURED_BUDGET = (
        "invalid_structured_budget",
        400,
        INVALID_REQUEST,
        "The structured-output budget (header or body field) is malformed or above the "
        "server's limit.",
        'Send a budget like `{"retries": 1, "seconds": 5}` within the limits.',
    )
    INVALID_COMPACTION = (
        "invalid_compaction",
        400,
        INVALID_REQUEST,
        "A compaction item cannot be opened (changed, from another deployment or tenant).",
        "Send the compaction item exactly as this deployment returned it, with the "
        "same tenant's key.",
    )
    CONTEXT_LENGTH_EXCEEDED = (
        "context_length_exceeded",
        400,
        INVALID_REQUEST,
        "The input is longer than the model's context window.",
        "Set `truncation` to `auto`, compact the conversation, or send less input.",
    )
    NON_PORTABLE_ITEM = (
        "non_portable_item",
        400,
        INVALID_REQUEST,
        "The input holds a provider-specific item that cannot be replayed to another model.",
        "Leave the item out (or set the gate's policy to `warn`).",
    )
    UNKNOWN_MCP_SERVER = (
        "unknown_mcp_server",
        400,
        INVALID_REQUEST,
        "An `mcp` tool names a server the operator did not configure.",
        "Use a configured server's label.",
    )
    MCP_ORIGIN_NOT_ALLOWED = (
        "mcp_origin_not_allowed",
        400,
        INVALID_REQUEST,
        "An `mcp` tool's `server_url` is not an origin the operator allows.",
        "Use a configured server or an allowed origin.",
    )
    MCP_SERVER_FORBIDDEN = (
        "mcp_server_forbidden",
        403,
        INVALID_REQUEST,
        "The API key's tenant may not use that MCP server.",
        "Use a server available to your key, or ask the operator.",
    )
    UPSTREAM_BAD_REQUEST = (
        "upstream_bad_request",
        400,
        INVALID_REQUEST,
        "The upstream rejected the request (its HTTP 4xx).",
        "Fix the request as the upstream's message says; retrying the same request fails again.",
    )

    # -- the replay gate: function calls and their outputs in the input (400) --------------
    NAMESPACED = (
        "namespaced",
        400,
        INVALID_REQUEST,
        "An input item's `type` is provider-specific (it contains `:`), or missing.",
        "Keep the item in its original session; do not replay it to another model.",
    )
    HOSTED_CALL = (
        "hosted_call",
        400,
        INVALID_REQUEST,
        "A hosted tool's call item is in the input, where only function calls replay.",
        "Leave it out; the tool's runner keeps its own history.",
    )
    NOT_FUNCTION_CALL = (
        "not_function_call",
        400,
        INVALID_REQUEST,
        "An item checked as a call is not a `function_call`.",
        "Send a `function_call` item.",
    )
    STATUS = (
        "status",
        400,
        INVALID_REQUEST,
        "A `function_call` item's `status` is not `completed` (or is missing).",
        "Replay only completed calls.",
    )
    ARGUMENTS_TYPE = (
        "arguments_type",
        400,
        INVALID_REQUEST,
        "A `function_call` item's `arguments` is missing or not a string.",
        "Send the arguments as a JSON string.",
    )
    ARGUMENTS_PARSE = (
        "arguments_parse",
        400,
        INVALID_REQUEST,
        "A `function_call` item's `arguments` is not valid JSON.",
        "Send valid JSON arguments.",
    )
    UNKNOWN_TOOL = (
        "unknown_tool",
        400,
        INVALID_REQUEST,
        "A `function_call` names a tool that is not in `tools`.",
        "Add the tool, or leave the call out.",
    )
    ARGUMENTS_SCHEMA = (
        "arguments_schema",
        400,
        INVALID_REQUEST,
        "A `function_call`'s arguments do not match the tool's `parameters`.",
        "Fix the arguments as the message says.",
    )
    MISSING_CALL_ID = (
        "missing_call_id",
        400,
        INVALID_REQUEST,
        "A call or call output has no `call_id`.",
        "Send the `call_id` of the call.",
    )
    ORPHAN_OUTPUT = (
        "orphan_output",
        400,
        INVALID_REQUEST,
        "A `function_call_output` (`custom_tool_call_output`) follows no call with its `call_id`.",
        "Put the call before its output, or fix the `call_id`.",
    )
    DUPLICATE_OUTPUT = (
        "duplicate_output",
        400,
        INVALID_REQUEST,
        "A second output for the same call.",
        "Send one output per call.",
    )
    MISMATCHED_OUTPUT = (
        "mismatched_output",
        400,
        INVALID_REQUEST,
        "A `custom_tool_call_output` answers a `function_call`, or a "
        "`function_call_output` a `custom_tool_call`.",
        "Answer a call with the output of its own kind.",
    )
    FAILED_CALL = (
        "failed_call",
        400,
        INVALID_REQUEST,
        "An output answers a call that did not pass the gate.",
        "Fix or leave out the call and its output.",
    )
    DUPLICATE_CALL = (
        "duplicate_call",
        400,
        INVALID_REQUEST,
        "Two `function_call` items share a `call_id`.",
        "Give each call its own `call_id`.",
    )

    # -- limits on what a request may cost --------------------------------------------------
    REQUEST_TOO_LARGE = (
        "request_too_large",
        413,
        INVALID_REQUEST,
        "The body (or WebSocket message) is larger than `limits.max_body_bytes`.",
        "Send a smaller request.",
    )
    REQUEST_TIMEOUT = (
        "request_timeout",
        408,
        INVALID_REQUEST,
        "The request head or body did not arrive within "
        "`limits.header_timeout`/`limits.body_timeout`.",
        "Send the request faster, or check the network.",
    )
    REQUEST_HEADER_FIELDS_TOO_LARGE = (
        "request_header_fields_too_large",
        431,
        INVALID_REQUEST,
        "The request line and headers are too large.",
        "Send fewer or shorter headers.",
    )
    INVALID_HTTP_REQUEST = (
        "invalid_http_request",
        400,
        INVALID_REQUEST,
        "The bytes received are not a valid HTTP/1.1 request.",
        "Fix the client's HTTP.",
    )
    UNSUPPORTED_MEDIA_TYPE = (
        "unsupported_media_type",
        415,
        INVALID_REQUEST,
        "The body is not sent as `application/json`.",
        "Send `Content-Type: application/json`.",
    )
    UNSUPPORTED_CONTENT_ENCODING = (
        "unsupported_content_encoding",
        415,
        INVALID_REQUEST,
        "The body has a `Content-Encoding` orgate does not decode (it decodes zstd, gzip and "
        "deflate), or more than one.",
        "Send the body uncompressed, or as one of the codings the `Accept-Encoding` header names.",
    )
    INVALID_COMPRESSED_BODY = (
        "invalid_compressed_body",
        400,
        INVALID_REQUEST,
        "A compressed body (`Content-Encoding` zstd, gzip or deflate) is corrupt, cut short, or "
        "a zstd frame asks for a window larger than 8 MiB.",
        "Send the body compressed whole, with a standard encoder.",
    )
    NESTING_TOO_DEEP = (
        "nesting_too_deep",
        400,
        INVALID_REQUEST,
        "The body is nested deeper than `limits.max_json_depth`.",
        "Flatten the request.",
    )
    STRING_TOO_LONG = (
        "string_too_long",
        400,
        INVALID_REQUEST,
        "A string in the body is longer than `limits.max_string_bytes`.",
        "Send shorter strings.",
    )
    TOO_MANY_ITEMS = (
        "too_many_items",
        400,
        INVALID_REQUEST,
        "`input` (or `messages`) has more items than `limits.max_input_items`.",
        "Send fewer items, or continue with `previous_response_id`.",
    )
    TOO_MANY_TOOLS = (
        "too_many_tools",
        400,
        INVALID_REQUEST,
        "`tools` has more tools than `limits.max_tools`.",
        "Send fewer tools.",
    )
    SCHEMA_TOO_LARGE = (
        "schema_too_large",
        400,
        INVALID_REQUEST,
        "A client JSON Schema is larger than the schema bounds allow.",
        "Send a smaller schema.",
    )
    SCHEMA_TOO_COMPLEX = (
        "schema_too_complex",
        400,
        INVALID_REQUEST,
        "A client JSON Schema is deeper, or has more or costlier parts, than the "
        "schema bounds allow.",
        "Simplify the schema.",
    )
    SCHEMA_EXCEEDS_OUTPUT = (
        "schema_exceeds_output",
        400,
        INVALID_REQUEST,
        "The smallest value a `text.format` schema or a tool's `parameters` admits is longer "
        "than the model can output (its output token cap): no answer could be complete.",
        "Ask for less (`minItems`, `minLength`, `minProperties`, required properties), or use "
        "a model with a larger output cap.",
    )

    # -- routes and resources ----------------------------------------------------------------
    NOT_FOUND = (
        "not_found",
        404,
        INVALID_REQUEST,
        "The route, stored response or review item does not exist (or the store is off).",
        "Check the URL and the id.",
    )
    METHOD_NOT_ALLOWED = (
        "method_not_allowed",
        405,
        INVALID_REQUEST,
        "The route does not serve this HTTP method.",
        "Use a method the `Allow` header lists.",
    )
    MODEL_NOT_FOUND = (
        "model_not_found",
        404,
        INVALID_REQUEST,
        "The model is not configured, or the API key may not use it.",
        "Use a model `GET /v1/models` lists.",
    )
    PREVIOUS_RESPONSE_NOT_FOUND = (
        "previous_response_not_found",
        404,
        INVALID_REQUEST,
        "`previous_response_id` names no response this key can continue.",
        "Send the id of a stored response, or the whole conversation.",
    )
    CONVERSATION_NOT_FOUND = (
        "conversation_not_found",
        404,
        INVALID_REQUEST,
        "The conversation (or a session of that key) does not exist for this API key's tenant, "
        "or no longer has its items (a response of its history was deleted or expired).",
        "Create it with `POST /v1/conversations`, or check the id.",
    )
    EVENTS_NOT_STORED = (
        "events_not_stored",
        400,
        INVALID_REQUEST,
        "`stream=true` on a stored response whose events were not kept.",
        "Fetch the response without `stream`.",
    )
    NOT_BACKGROUND = (
        "not_background",
        400,
        INVALID_REQUEST,
        "A cancel for a response that was not created with `background: true`.",
        "Cancel background responses only.",
    )
    STORE_DISABLED = (
        "store_disabled",
        404,
        INVALID_REQUEST,
        "A console view of stored responses while the store is off.",
        "Turn the store on (`[store] enabled = true`).",
    )
    INVALID_REVIEW_RESOLUTION = (
        "invalid_review_resolution",
        400,
        INVALID_REQUEST,
        "A review-queue resolution is neither a value nor a discard, or does not validate.",
        'Send `{"value": <object>}` or `{"discard": true}`.',
    )

    # -- authentication and permissions ------------------------------------------------------
    MISSING_API_KEY = (
        "missing_api_key",
        401,
        AUTHENTICATION,
        "No API key was sent (400 from the console's sign-in form).",
        "Send `Authorization: Bearer <key>`.",
    )
    INVALID_API_KEY = (
        "invalid_api_key",
        401,
        AUTHENTICATION,
        "The API key is unknown, or the `Authorization` header is malformed or repeated.",
        "Send one `Authorization: Bearer <key>` with a valid key.",
    )
    CONSOLE_SESSION_REQUIRED = (
        "console_session_required",
        401,
        AUTHENTICATION,
        "A console endpoint without a signed-in session.",
        "Sign in to the console.",
    )
    CSRF_FAILED = (
        "csrf_failed",
        403,
        INVALID_REQUEST,
        "A console POST or DELETE without a valid CSRF token, or from another origin.",
        "Reload the console page and retry.",
    )
    ADMIN_REQUIRED = (
        "admin_required",
        403,
        PERMISSION,
        "A console view for administrators, asked by another key.",
        "Sign in with an admin key.",
    )

    # -- rate limits, capacity and concurrency -----------------------------------------------
    TOO_MANY_SIGN_IN_ATTEMPTS = (
        "too_many_sign_in_attempts",
        429,
        RATE_LIMIT,
        "Console sign-in: too many wrong keys from this client address, or of this key; no key"
        " is checked until the wait is over.",
        "Retry after the `Retry-After` header's seconds, with the right key.",
    )
    RATE_LIMIT_EXCEEDED = (
        "rate_limit_exceeded",
        429,
        RATE_LIMIT,
        "The key's rate limit, or the upstream's, is reached.",
        "Retry after the `Retry-After` header's seconds.",
    )
    TOO_MANY_CONCURRENT_REQUESTS = (
        "too_many_concurrent_requests",
        429,
        RATE_LIMIT,
        "The model's deployments are all at their concurrency limit.",
        "Retry after a short wait.",
    )
    TOO_MANY_WEBSOCKET_CONNECTIONS = (
        "too_many_websocket_connections",
        429,
        RATE_LIMIT,
        "The key has as many WebSocket connections open as it may.",
        "Close a connection, or reuse one.",
    )
    WEBSOCKET_CAPACITY_REACHED = (
        "websocket_capacity_reached",
        503,
        _SERVER,
        "The server has as many WebSocket connections open as it may.",
        "Retry later, or use HTTP.",
    )
    WEBSOCKET_IDLE_TIMEOUT = (
        "websocket_idle_timeout",
        400,
        INVALID_REQUEST,
        "The WebSocket connection was idle for `websocket.idle_seconds`.",
        "Open a new connection.",
    )
    WEBSOCKET_CONNECTION_LIMIT_REACHED = (
        "websocket_connection_limit_reached",
        400,
        INVALID_REQUEST,
        "The WebSocket connection reached its maximum lifetime.",
        "Open a new connection.",
    )
    WEBSOCKET_DISABLED = (
        "websocket_disabled",
        426,
        INVALID_REQUEST,
        "WebSocket mode is off on this server.",
        "Use HTTP (`POST /v1/responses`, with `stream: true` for events).",
    )
    WEBSOCKET_STREAM_LIMIT_REACHED = (
        "websocket_stream_limit_reached",
        400,
        INVALID_REQUEST,
        "A `response.create` names a new `stream_id` on a multiplexed WebSocket connection that "
        "already has `websocket.max_streams` named streams (OpenAI's code).",
        "Reuse one of the connection's streams, or open a new connection.",
    )
    WEBSOCKET_ACTIVE_RESPONSE_LIMIT_REACHED = (
        "websocket_active_response_limit_reached",
        429,
        RATE_LIMIT,
        "A `response.create` on a multiplexed WebSocket connection that already has "
        "`websocket.max_active_responses` responses running or queued.",
        "Wait for a terminal event on the connection, then send it again.",
    )
    RESPONSE_IN_PROGRESS = (
        "response_in_progress",
        409,
        INVALID_REQUEST,
        "A `response.create` on a WebSocket connection that is still answering one.",
        "Wait for the terminal event before sending the next.",
    )
    SESSION_BUSY = (
        "session_busy",
        409,
        INVALID_REQUEST,
        "Another request of the same session (conversation) is in progress: a turn, an "
        "addition of items, or a delete of the conversation while a turn runs.",
        "Wait for it to finish, then retry.",
    )
    MCP_APPROVAL_IN_PROGRESS = (
        "mcp_approval_in_progress",
        409,
        INVALID_REQUEST,
        "An `mcp_approval_response` answers an approval request that another response is acting"
        " on now (a retry, or the same answer sent twice at once): its call runs once.",
        "Retry after the `Retry-After` header's seconds: the retry gets that call's outcome.",
    )

    # -- the model's output ------------------------------------------------------------------
    MODEL_ERROR = (
        "model_error",
        500,
        _MODEL,
        "The model failed (the built-in test models' scripted failures).",
        "Retry, or use another model.",
    )
    STRUCTURED_OUTPUT_INVALID = (
        "structured_output_invalid",
        400,
        _MODEL,
        "The model's output never matched `text.format` within the safety net's budget "
        "(a 400 with `x-should-retry: false`: sending it again unchanged spends the budget again).",
        "Relax the schema or raise the budget, then send again; the `X-Orgate-Structured-*` "
        "headers say why.",
    )
    INVALID_TOOL_ARGUMENTS = (
        "invalid_tool_arguments",
        400,
        _MODEL,
        "The model's tool calls never matched the tools' `parameters` within the tool guard's "
        "retries (a 400 with `x-should-retry: false`, like `structured_output_invalid`).",
        "Simplify the tools or raise `[gate] tool_retries`, then send again.",
    )
    TOOL_CHOICE_VIOLATION = (
        "tool_choice_violation",
        400,
        _MODEL,
        "The model's tool calls never obeyed `tool_choice` within the tool guard's retries "
        "(a 400 with `x-should-retry: false`).",
        "Loosen `tool_choice`, then send again.",
    )
    SEMANTIC_CHECK_ERROR = (
        "semantic_check_error",
        500,
        _SERVER,
        "The operator's semantic check of a structured output failed to run.",
        "Do not retry; tell the operator.",
    )
    COMPACTION_FAILED = (
        "compaction_failed",
        502,
        _SERVER,
        "The model answered a compaction with no summary text.",
        "Retry, or compact with another model.",
    )

    # -- upstreams ---------------------------------------------------------------------------
    UPSTREAM_ERROR = (
        "upstream_error",
        502,
        _SERVER,
        "The upstream failed (its 5xx, or an error in its stream); 501 when it does "
        "not implement the request.",
        "Retry later; a 501 will not succeed on retry.",
    )
    UPSTREAM_FAILED = (
        "upstream_failed",
        502,
        _MODEL,
        "An upstream Responses API reported `response.failed` without a code of its "
        "own (with one, its code is passed on).",
        "Retry, or read the upstream's message.",
    )
    UPSTREAM_TIMEOUT = (
        "upstream_timeout",
        504,
        _SERVER,
        "The upstream did not answer in time.",
        "Retry later.",
    )
    UPSTREAM_UNAVAILABLE = (
        "upstream_unavailable",
        503,
        _SERVER,
        "No deployment of the model could be reached (503), or the connection failed (502).",
        "Retry later.",
    )
    UPSTREAM_OVERLOADED = (
        "upstream_overloaded",
        503,
        _SERVER,
        "The upstream says it is overloaded.",
        "Retry after the `Retry-After` header's seconds.",
    )
    UPSTREAM_AUTH_FAILED = (
        "upstream_auth_failed",
        502,
        _SERVER,
        "The upstream rejected orgate's credentials.",
        "Tell the operator: the deployment's key is wrong.",
    )
    UPSTREAM_MODEL_NOT_FOUND = (
        "upstream_model_not_found",
        502,
        _SERVER,
        "The upstream does not know the configured model or endpoint.",
        "Tell the operator: the deployment's model or URL is wrong.",
    )
    UPSTREAM_REDIRECT = (
        "upstream_redirect",
        502,
        _SERVER,
        "The upstream answered with a redirect orgate does not follow.",
        "Tell the operator: the deployment's URL is out of date.",
    )
    UPSTREAM_INVALID_RESPONSE = (
        "upstream_invalid_response",
        502,
        _SERVER,
        "The upstream's answer is not its wire format (a web page, bad JSON, events "
        "out of order, no event).",
        "Retry; if it persists, tell the operator.",
    )
    UPSTREAM_STREAM_TRUNCATED = (
        "upstream_stream_truncated",
        502,
        _SERVER,
        "The upstream's stream ended before its answer did.",
        "Retry.",
    )

    # -- orgate itself -----------------------------------------------------------------------
    SERVER_ERROR = (
        "server_error",
        500,
        _SERVER,
        "An unexpected error in orgate (logged with the request id).",
        "Retry; if it persists, report the `x-request-id`.",
    )
    STORE_UNAVAILABLE = (
        "store_unavailable",
        503,
        _SERVER,
        "The response store cannot be reached.",
        "Retry later.",
    )
    STORE_CORRUPT = (
        "store_corrupt",
        500,
        _SERVER,
        "Stored history could not be read back.",
        "Start a new conversation; tell the operator.",
    )
    SERVER_SHUTDOWN = (
        "server_shutdown",
        503,
        _SERVER,
        "The server shut down before the response finished.",
        "Retry (another worker or instance answers).",
    )
    CLIENT_DISCONNECTED = (
        "client_disconnected",
        499,
        _SERVER,
        "The client went away before the response finished (seen on the stored response).",
        "Nothing: the response is stored as failed.",
    )

    # -- the web console's tools -------------------------------------------------------------
    INVALID_INPUT = (
        "invalid_input",
        400,
        INVALID_REQUEST,
        "A console gate/diff input (trajectory or log) cannot be read.",
        "Fix the file as the message says.",
    )
    INVALID_TOOLS = (
        "invalid_tools",
        400,
        INVALID_REQUEST,
        "A console gate input's tools cannot be loaded.",
        "Fix the tools file as the message says.",
    )
    INVALID_REPORT = (
        "invalid_report",
        400,
        INVALID_REQUEST,
        "A console eval report is not a report orgate wrote.",
        "Upload the JSON that `orgate eval` wrote.",
    )


_BY_VALUE: dict[str, ErrorCode] = {code.value: code for code in ErrorCode}


def code_of(value: str) -> ErrorCode:
    """The member whose wire string is ``value`` (``ErrorCode(value)``, typed: the members'
    ``__new__`` takes their attributes, so a checker reads the call as making one)."""
    try:
        return _BY_VALUE[value]
    except KeyError:
        raise ValueError(f"{value!r} is not a valid ErrorCode") from None


def markdown_table() -> str:
    """The catalogue as the Markdown table of ``docs/errors.md``
    (which a test keeps equal to it)."""
    lines = ["| code | status | type | when | what the client should do |", "|---|---|---|---|---|"]
    for code in ErrorCode:
        lines.append(f"| `{code}` | {code.status} | `{code.type}` | {code.when} | {code.action} |")
    return "\n".join(lines) + "\n"


__all__ = [
    "AUTHENTICATION",
    "INVALID_REQUEST",
    "MODEL_ERROR",
    "NOT_FOUND",
    "PERMISSION",
    "RATE_LIMIT",
    "SERVER_ERROR",
    "ErrorCode",
    "code_of",
    "markdown_table",
]
