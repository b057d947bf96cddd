"""The spec's ``obfuscation`` field: random characters that pad a streamed delta event.

With ``stream_options.include_obfuscation`` (the spec's default: true) the delta events
(``output_text``, ``reasoning``, ``reasoning_summary_text``, ``function_call_arguments``)
carry ``obfuscation``: characters that round the delta's UTF-8 length up to a multiple of
``PAD_TO``, so the size of an encrypted frame does not tell how long the text in it is.
What hides a delta is the padding's length; its characters travel inside TLS. They are
random per process, drawn at start-up: ``PADDING[n % PAD_TO]`` is the padding of an
``n``-byte delta (a table lookup per event: the streams that carry it by default pay
little for it); ``padding(delta)`` looks it up.

``pads(stream_options, default)`` is the one rule for whether a stream is padded: the
request's ``include_obfuscation`` when it says, else the configured default
(``[endpoints.responses] obfuscation``, the spec's default: true) — for
``/v1/responses`` and the chat adapter alike.
"""

from __future__ import annotations

import secrets
import string
from typing import Any

#: A padded delta and its padding together are a multiple of this many bytes long.
PAD_TO = 32

_ALPHABET = string.ascii_letters + string.digits
#: ``PADDING[r]``: the padding of a delta of ``r`` bytes more than a multiple of ``PAD_TO``
#: (``PAD_TO - r`` characters; a whole ``PAD_TO`` for ``r == 0``: never empty).
PADDING = tuple(
    "".join(secrets.choice(_ALPHABET) for _ in range(PAD_TO - r)) for r in range(PAD_TO)
)


def padding(delta: str) -> str:
    """The ``obfuscation`` value for an event (or chunk) that adds ``delta``."""
    return PADDING[len(delta.encode()) % PAD_TO]


def pads(stream_options: Any, default: bool) -> bool:
    """Whether a stream with these ``stream_options`` (any object with ``include_obfuscation``,
    or None) is padded."""
    asked = stream_options.include_obfuscation if stream_options is not None else None
    return default if asked is None else asked
