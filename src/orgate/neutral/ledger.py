"""The translation ledger: what orgate mapped, approximated or dropped between a client's
request and an upstream, and back (docs/translation.md).

Every response's ``ModelRequest`` carries a ``Ledger``: the engine, the provider mappings and
the decoders ``note`` each translation that is not the identity, with a code from the
catalogue below (``Translation``) and the param path it concerns (``tools[1]``,
``input[3]``, ``reasoning.summary``). Nothing is dropped without an entry. The engine shows
the entries in the ``X-Orgate-Translation`` header, the stored response's record, the
console's inspector and the ``orgate_translations_total`` metric; a deployment's
``[translation] refuse`` list turns request-side entries of the codes (or kinds) it names
into a 400 before the upstream is called (``refused``). The catalogue is this module's
enum; docs/translation.md is generated from it (``scripts/translation_doc.py``).

An empty ledger is a bare list: one allocation per request, no call.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

MAPPED = "mapped"  # sent in the upstream's own terms, meaning kept
APPROXIMATED = "approximated"  # sent in other terms that keep part of the meaning
DROPPED = "dropped"  # not sent (or not shown) at all

REQUEST = "request"  # on the way to the upstream: a refuse policy can stop it
RESPONSE = "response"  # on the way back: recorded only (the answer is on its way)


class Translation(StrEnum):
    """A translation's code, with its kind, its side and what it means."""

    kind: str
    side: str
    what: str

    def __new__(cls, value: str, kind: str, side: str, what: str) -> Translation:
        member = str.__new__(cls, value)
        member._value_ = value
        member.kind = kind
        member.side = side
        member.what = what
        return member

    # -- tools --------------------------------------------------------------------------------
    HOSTED_TOOL_DROPPED = (
        "hosted_tool_dropped",
        DROPPED,
        REQUEST,
        "A hosted tool (`web_search`, `file_search`, an `mcp` tool offered by an "
        "`additional_tools` item…) that no upstream of the model runs was not sent "
        '(the model\'s `hosted_tools = "drop"`).',
    )
    CUSTOM_TOOL_AS_FUNCTION = (
        "custom_tool_as_function",
        APPROXIMATED,
        REQUEST,
        "A `custom` tool went as a function with one string argument `input`; its grammar "
        "went into the description, where the upstream cannot enforce it.",
    )
    CUSTOM_CALL_AS_FUNCTION_CALL = (
        "custom_call_as_function_call",
        MAPPED,
        REQUEST,
        "A `custom_tool_call` (or its output) from the conversation went as the function "
        "call (output) that stands for it.",
    )
    CUSTOM_CALL_FROM_FUNCTION_CALL = (
        "custom_call_from_function_call",
        MAPPED,
        RESPONSE,
        "The upstream called the function that stands for a `custom` tool: the client got a "
        "`custom_tool_call` with the call's `input` string.",
    )
    ADDITIONAL_TOOLS_OFFERED = (
        "additional_tools_offered",
        MAPPED,
        REQUEST,
        "An `additional_tools` item's tools were offered as tools; the item itself was not sent.",
    )
    ALLOWED_TOOLS_AS_SUBSET = (
        "allowed_tools_as_subset",
        MAPPED,
        REQUEST,
        "An `allowed_tools` tool choice went as the allowed tools alone, with its mode.",
    )
    # -- input items --------------------------------------------------------------------------
    REASONING_ITEM_DROPPED = (
        "reasoning_item_dropped",
        DROPPED,
        REQUEST,
        "A reasoning item this upstream cannot read (made by another provider, or not "
        "portable to its wire) was not sent.",
    )
    COMPACTION_ITEM_DROPPED = (
        "compaction_item_dropped",
        DROPPED,
        REQUEST,
        "A `compaction` item this upstream cannot read was not sent.",
    )
    EXTENSION_ITEM_DROPPED = (
        "extension_item_dropped",
        DROPPED,
        REQUEST,
        "Another upstream's own item from the history (kept for that upstream) was not sent "
        "to this one.",
    )
    DEVELOPER_AS_SYSTEM = (
        "developer_as_system",
        APPROXIMATED,
        REQUEST,
        "A `developer` message went as a `system` message (the upstream has no developer role).",
    )
    SYSTEM_MESSAGE_TO_SYSTEM_PROMPT = (
        "system_message_to_system_prompt",
        APPROXIMATED,
        REQUEST,
        "A `system` or `developer` message went into the upstream's one system prompt, out "
        "of its place in the conversation.",
    )
    # -- settings -----------------------------------------------------------------------------
    FIELD_DROPPED = (
        "field_dropped",
        DROPPED,
        REQUEST,
        "A request field the model's upstream has no equivalent for was not sent (the path "
        "names it).",
    )
    SAFETY_IDENTIFIER_AS_USER = (
        "safety_identifier_as_user",
        MAPPED,
        REQUEST,
        "`safety_identifier` went as the upstream's user identifier.",
    )
    JSON_FORMAT_AS_INSTRUCTION = (
        "json_format_as_instruction",
        APPROXIMATED,
        REQUEST,
        "A JSON `text.format` went as an instruction in the system prompt (the upstream has "
        "no JSON mode); the safety net checks the answer.",
    )
    JSON_SCHEMA_IN_DIALECT = (
        "json_schema_in_dialect",
        MAPPED,
        REQUEST,
        "A `json_schema` format went in the upstream's own constrained-decoding dialect (the "
        "detail names it: `json_object_schema`, `guided_json`, `structured_outputs`, "
        "`json_schema_field`, `output_config`); the upstream enforces the schema, the safety "
        "net checks the answer.",
    )
    JSON_FORMAT_AS_FORCED_TOOL = (
        "json_format_as_forced_tool",
        MAPPED,
        REQUEST,
        "A `json_schema` format went as a tool whose input schema is the format, forced "
        "(the upstream has no structured output of its own).",
    )
    FORCED_TOOL_CALL_AS_TEXT = (
        "forced_tool_call_as_text",
        MAPPED,
        RESPONSE,
        "The call of the tool a JSON format went as came back as the answer's text (its "
        "arguments are the JSON).",
    )
    REASONING_EFFORT_AS_BUDGET = (
        "reasoning_effort_as_budget",
        APPROXIMATED,
        REQUEST,
        "`reasoning.effort` went as a thinking budget in tokens.",
    )
    REASONING_LEFT_OFF = (
        "reasoning_left_off",
        DROPPED,
        REQUEST,
        "Reasoning was left off: the assistant turn the request continues called a tool "
        "without its thinking blocks, which Anthropic requires with extended thinking.",
    )
    # -- the answer ---------------------------------------------------------------------------
    UPSTREAM_ITEM_DROPPED = (
        "upstream_item_dropped",
        DROPPED,
        RESPONSE,
        "Output the upstream sent that has no place in a response (an event or item of a "
        "kind orgate does not pass on, counted in the detail) was left out.",
    )
    UPSTREAM_ITEM_WITHHELD = (
        "upstream_item_withheld",
        DROPPED,
        RESPONSE,
        "An upstream's own output item (`web_search_call`…, outside the spec's output) was "
        "kept in the history for that upstream, not shown to the client.",
    )


class LedgerEntry(NamedTuple):
    """One translation: its code, the param path it concerns, and a detail (may be empty)."""

    code: Translation
    path: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        """The entry as the stored record and the console show it."""
        return {
            "code": self.code.value,
            "kind": self.code.kind,
            "side": self.code.side,
            "path": self.path,
            "detail": self.detail,
        }


class Ledger(list[LedgerEntry]):
    """A response's translations, in the order noted (each code and path once)."""

    # No ``__init__`` and no slots: making one costs what making a list does. ``refuse`` is set
    # on the instance only when a deployment has a policy.
    #: Codes and kinds a deployment refuses instead of translating (``[translation] refuse``).
    refuse: frozenset[str] = frozenset()

    def note(self, code: Translation, path: str, detail: str = "") -> None:
        """Record one translation (once: a fallback to a second upstream notes it again)."""
        entry = LedgerEntry(code, path, detail)
        if entry not in self:
            self.append(entry)

    def refused(self) -> LedgerEntry | None:
        """The first request-side entry the refuse policy names, if any."""
        refuse = self.refuse
        if not refuse:
            return None
        for entry in self:
            code = entry.code
            if code.side == REQUEST and (code.value in refuse or code.kind in refuse):
                return entry
        return None

    def header(self, limit: int = 12) -> str:
        """The compact form of ``X-Orgate-Translation``: ``code=path`` pairs, the first
        ``limit`` of them (then ``+N``; every entry is in the stored record)."""
        shown = [f"{e.code.value}={e.path}" if e.path else e.code.value for e in self[:limit]]
        if len(self) > limit:
            shown.append(f"+{len(self) - limit}")
        return ", ".join(shown)


KINDS = (MAPPED, APPROXIMATED, DROPPED)


def markdown_table() -> str:
    """The catalogue as docs/translation.md shows it (``scripts/translation_doc.py``)."""
    rows = ["| code | kind | side | what it means |", "|---|---|---|---|"]
    rows += [f"| `{t.value}` | {t.kind} | {t.side} | {t.what} |" for t in Translation]
    return "\n".join(rows) + "\n"


__all__ = [
    "APPROXIMATED",
    "DROPPED",
    "KINDS",
    "MAPPED",
    "REQUEST",
    "RESPONSE",
    "Ledger",
    "LedgerEntry",
    "Translation",
    "markdown_table",
]
