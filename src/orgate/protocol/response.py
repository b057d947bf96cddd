"""The response object (``ResponseResource``) and its usage parts.

The response object has one definition at run time: the dict ``engine/response_echo.py``
lays out (the fields echoed from the request, in the spec's order) and ``ResponseBuilder``
completes for each snapshot. A Pydantic model here would be a second definition kept in step
by hand, and building every snapshot through one (validated, then dumped) costs each request
more than copying a dict, on the hot path. So ``ResponseResource`` is a name for that dict, not
a model: the spec's own ``ResponseResource`` schema is the reference, and
tests/engine/test_response_shape.py validates every variant the builder makes against it.

Its parts (``Usage`` and its details, ``Error``, ``IncompleteDetails``) stay models, like every
other component schema of the spec: ``CompactResource`` (``compact.py``) is declared with them.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from orgate.protocol._base import WireModel

#: The response object, as ``engine/builder.py`` makes it (see the module docstring).
ResponseResource: TypeAlias = dict[str, Any]


class IncompleteDetails(WireModel):
    reason: str


class Error(WireModel):
    """The error of a failed response (the response object's ``error``)."""

    code: str
    message: str


class InputTokensDetails(WireModel):
    cached_tokens: int = 0


class OutputTokensDetails(WireModel):
    reasoning_tokens: int = 0


class Usage(WireModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens_details: OutputTokensDetails


__all__ = [
    "Error",
    "IncompleteDetails",
    "InputTokensDetails",
    "OutputTokensDetails",
    "ResponseResource",
    "Usage",
]
