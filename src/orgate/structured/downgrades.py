"""What an upstream refused of structured output, learnt at run time and remembered per
deployment: the refusal ladder.

Every server constrains JSON its own way (neutral/dialects.py), and a user rarely knows
which of them their server takes. When the safety net's first attempt is refused outright
in a mode that sends something the upstream may not take (its ``Plan.level``: a schema
dialect, or ``json_object``), the net asks again with the next mode down:

    each of ``capabilities.schema_dialects``, strongest first
        → json_object + the schema in the instructions
        → the schema in the instructions only

(llama-cpp-python's server, say: ``json_schema`` is refused with a 500, ``json_object`` with
the ``schema`` — its grammar — is answered.) Once a lower mode is accepted, the refused
level is remembered for that deployment until the process restarts (``ModeDowngrades``).
A capability the configuration set (``capabilities = { schema_dialects = … }``,
``json_schema``, ``json_object``; ``Capabilities.declared``) is never overridden: its
refusals reach the client as they are.

A level the deployment has answered before is known to work there: a later refusal of it
concerns that one request (a schema its grammar compiler cannot take), so the request goes
down the ladder but nothing is remembered.

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
from orgate.structured.modes import Level

log = logging.getLogger("orgate.structured")

# Words of an upstream 400 that is about the response format (OpenAI, vLLM, llama.cpp,
# Ollama, LiteLLM, Anthropic phrasings), not about the rest of the request.
_FORMAT_WORDS = (
    "response_format",
    "json_schema",
    "json_object",
    "json schema",
    "grammar",
    "guided_json",
    "structured_outputs",
    "output_config",
    "tool_choice",
    "schema",
)
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


def _declared(caps: Capabilities, level: Level) -> bool:
    """Whether the configuration set what ``level`` stands for (its refusals are passed on)."""
    if level == "json_object":
        return "json_object" in caps.declared
    return bool({"schema_dialects", "json_schema"} & caps.declared)


def without(caps: Capabilities, level: Level) -> Capabilities | None:
    """``caps`` without ``level`` (a dialect, or ``json_object``), or None when the
    configuration declared it."""
    if _declared(caps, level):
        return None
    if level == "json_object":
        return dataclasses.replace(caps, json_object=False)
    return dataclasses.replace(
        caps, schema_dialects=tuple(d for d in caps.schema_dialects if d != level)
    )


class ModeDowngrades:
    """Per deployment name: the levels its upstream refused, and those it answered (until
    restart)."""

    def __init__(self) -> None:
        self._refused: dict[str, frozenset[Level]] = {}
        self._answered: dict[str, frozenset[Level]] = {}
        self._lock = threading.Lock()

    def apply(self, name: str, caps: Capabilities) -> Capabilities:
        """``caps`` with what ``name``'s upstream was seen to refuse turned off."""
        refused = self._refused.get(name)
        if not refused:
            return caps
        for level in refused:
            caps = without(caps, level) or caps
        return caps

    def answered(self, name: str, level: Level | None) -> None:
        """``name``'s upstream answered ``level``: it works there."""
        if level is None or level in self._answered.get(name, ()):
            return
        with self._lock:
            self._answered[name] = self._answered.get(name, frozenset()) | {level}

    def learn(self, name: str, refused: list[Level], to_mode: str) -> None:
        """``name``'s upstream refused ``refused`` and answered ``to_mode``: remember the levels
        it never answered before."""
        known = self._answered.get(name, frozenset())
        new = {level for level in refused if level not in known}
        if not new:
            return
        with self._lock:
            before = self._refused.get(name, frozenset())
            self._refused[name] = before | new
        if not new <= before:
            log.warning(
                "upstream of %s refused %s: using %s for it until restart",
                name,
                ", ".join(sorted(new)),
                to_mode,
                extra={"model": name, "refused": sorted(new), "mode": to_mode},
            )

    def refused(self, name: str) -> frozenset[Level]:
        return self._refused.get(name, frozenset())
