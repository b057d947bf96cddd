"""WebSocket mode of ``/v1/responses``: the client's create event and the error event.

Server progress messages over a WebSocket are the ordinary streaming events.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from orgate.protocol._base import WireModel, omittable
from orgate.protocol.request import CreateResponseBody


class WebSocketResponseCreateEvent(CreateResponseBody):
    """A ``response.create`` client message: a ``CreateResponseBody`` plus ``type``.

    ``stream``, ``stream_options`` and ``background`` are not allowed over a WebSocket.
    """

    type: Literal["response.create"]

    @field_validator("stream", "stream_options", "background", mode="before")
    @classmethod
    def _disallowed(cls, value: Any) -> Any:
        raise ValueError("this field is not allowed in a WebSocket response.create event")


class WebSocketErrorDetail(WireModel):
    """The inline ``error`` object of ``WebSocketErrorEvent`` (not a named schema)."""

    model_config = {**WireModel.model_config, "extra": "allow"}

    type: str | None = omittable()
    code: str
    message: str
    param: str | None = omittable()


class WebSocketErrorEvent(WireModel):
    type: Literal["error"] = "error"
    status: int
    error: WebSocketErrorDetail
