"""The neutral contract between the engine and the providers.

``ModelRequest`` is what every provider is asked; ``ModelEvent`` is what every
provider yields, in batches (``Provider``, ``WrapperProvider``: ``provider.py``);
``Deployment`` is how to reach one upstream; ``OpaqueItem``
is an upstream's own item kept in history for that upstream only
(``orgate.neutral.items``). Providers translate these to and from one wire
protocol each; the engine never sees a provider's wire format.
"""

from orgate.neutral.batches import aclose, aclose_quietly, batches_of_one, one_by_one
from orgate.neutral.deployment import Capabilities, Deployment
from orgate.neutral.events import (
    CompactionItem,
    ExtensionItem,
    Finish,
    FinishReason,
    McpApproval,
    McpCallDone,
    McpCallStart,
    McpListDone,
    McpListStart,
    ModelEvent,
    ReasoningDelta,
    ReasoningEncrypted,
    ReasoningStart,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    token_count,
)
from orgate.neutral.items import EXTENSION_ITEM_TYPE, OpaqueItem, extension_wire, origin_of
from orgate.neutral.ledger import Ledger, LedgerEntry, Translation
from orgate.neutral.provider import Provider, WrapperProvider
from orgate.neutral.request import InputItem, ModelRequest, TextFormat

__all__ = [
    "aclose",
    "aclose_quietly",
    "EXTENSION_ITEM_TYPE",
    "Capabilities",
    "CompactionItem",
    "Deployment",
    "ExtensionItem",
    "McpApproval",
    "McpCallDone",
    "McpCallStart",
    "McpListDone",
    "McpListStart",
    "Finish",
    "FinishReason",
    "Ledger",
    "LedgerEntry",
    "ModelEvent",
    "InputItem",
    "ModelRequest",
    "OpaqueItem",
    "Provider",
    "ReasoningDelta",
    "ReasoningEncrypted",
    "ReasoningStart",
    "RefusalDelta",
    "TextDelta",
    "TextFormat",
    "ToolCallDelta",
    "ToolCallStart",
    "Translation",
    "Usage",
    "WrapperProvider",
    "token_count",
    "batches_of_one",
    "one_by_one",
    "extension_wire",
    "origin_of",
]
