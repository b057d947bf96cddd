"""JSON modes an upstream refused, learnt at run time and remembered per deployment.

Many OpenAI-compatible servers take ``response_format`` ``json_object`` but not
``json_schema`` (llama.cpp's Python server answers 500 or 422), some neither. A user
rarely knows this of their server. When the safety net's first attempt is refused
outright in a mode that sends a response format, the net asks again once with the next
mode down:

    json_schema (strict or not) → json_object + the schema in the instructions
                                → the schema in the instructions only

and, once a lower mode is accepted, remembers it for that deployment until the process
restarts (``ModeDowngrades``). A capability the configuration set (``capabilities =
{ json_schema = … }``, ``Capabilities.declared``) is never overridden: its refusals reach
the client as they are.

Which refusals count (``refuses_format``): an upstream 400/422 that names the response
format, or an upstream 5xx / a stream cut before its end (llama.cpp's server fails after
its 200). Nothing is remembered unless the lower mode then succeeds, so an upstream that
is simply down teaches nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import threading

from orgate.neutral import Capabilities
from orgate.protocol.errors import ApiError, ErrorCode

log = logging.getLogger("orgate.structured")

# Words of an upstream 400 that is about the response format (OpenAI, vLLM, llama.cpp,
# Ollama, LiteLLM phrasings), not about the rest of the request.
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "json schema", "grammar")
# Upstream failures that an unknown response format may cause on servers that do not
# validate it (a 500 from inside a chat handler, a stream that ends early).
_FAILURE_CODES = frozenset(
    {
        ErrorCode.UPSTREAM_ERROR,
        ErrorCode.UPSTREAM_STREAM_TRUNCATED,
        ErrorCode.UPSTREAM_INVALID_RESPONSE,
    }
)


def refuses_format(error: ApiError) -> bool:
    """Whether ``error`` may be an upstream refusing the request's response format."""
    if error.status == 400 and error.code == ErrorCode.UPSTREAM_BAD_REQUEST:
        message = error.message.lower()
        return any(word in message for word in _FORMAT_WORDS)
    return error.status == 502 and error.code in _FAILURE_CODES


def level_of(mode: str) -> str | None:
    """The response format ``mode`` sends upstream: ``json_schema``, ``json_object`` or None."""
    if mode.startswith("json_schema"):
        return "json_schema"
    if mode.startswith("json_object"):
        return "json_object"
    return None


def without(caps: Capabilities, level: str) -> Capabilities | None:
    """``caps`` without the response format ``level`` (and the ones above it), or None when
    the configuration declared that format."""
    off = ("json_schema",) if level == "json_schema" else ("json_schema", "json_object")
    if level in caps.declared:
        return None
    return dataclasses.replace(caps, **{name: False for name in off})


class ModeDowngrades:
    """Per deployment name: the response formats its upstream refused (until restart)."""

    def __init__(self) -> None:
        self._refused: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()

    def apply(self, name: str, caps: Capabilities) -> Capabilities:
        """``caps`` with what ``name``'s upstream was seen to refuse turned off."""
        refused = self._refused.get(name)
        if not refused:
            return caps
        return dataclasses.replace(caps, **{flag: False for flag in refused - caps.declared})

    def learn(self, name: str, level: str, to_mode: str) -> None:
        off = {"json_schema"} if level == "json_schema" else {"json_schema", "json_object"}
        with self._lock:
            before = self._refused.get(name, frozenset())
            self._refused[name] = before | off
        if not off <= before:
            log.warning(
                "upstream of %s refused response_format %s: using %s for it until restart",
                name,
                level,
                to_mode,
                extra={"model": name, "refused": level, "mode": to_mode},
            )

    def refused(self, name: str) -> frozenset[str]:
        return self._refused.get(name, frozenset())
