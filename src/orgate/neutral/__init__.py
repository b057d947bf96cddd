"""The neutral contract between the engine and the providers.

``ModelRequest`` is what every provider is asked; ``ModelEvent`` is what every
provider yields; ``Deployment`` is how to reach one upstream. Providers
translate these to and from one wire protocol each; the engine never sees a
provider's wire format.
"""

from orgate.neutral.batches import batches
from orgate.neutral.deployment import Capabilities, Deployment
from orgate.neutral.events import (
    Finish,
    FinishReason,
    ModelEvent,
    ReasoningDelta,
    ReasoningEncrypted,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.neutral.request import ModelRequest, Provider, TextFormat

__all__ = [
    "Capabilities",
    "Deployment",
    "Finish",
    "FinishReason",
    "ModelEvent",
    "ModelRequest",
    "Provider",
    "ReasoningDelta",
    "ReasoningEncrypted",
    "RefusalDelta",
    "TextDelta",
    "TextFormat",
    "ToolCallDelta",
    "ToolCallStart",
    "Usage",
    "batches",
]
