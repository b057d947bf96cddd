"""The spec's ``obfuscation`` field: random characters that pad a streamed delta event.

With ``stream_options.include_obfuscation`` (the spec's default: true) the delta events
(``output_text``, ``reasoning``, ``reasoning_summary_text``, ``function_call_arguments``)
carry ``obfuscation``: characters that round the delta's UTF-8 length up to a multiple of
``PAD_TO``, so the size of an encrypted frame does not tell how long the text in it is.
What hides a delta is the padding's length; its characters travel inside TLS. They are
random per process, drawn at start-up: ``PADDING[n % PAD_TO]`` is the padding of an
``n``-byte delta (a table lookup per event: the streams that carry it by default pay
little for it).
"""

from __future__ import annotations

import secrets
import string

#: A padded delta and its padding together are a multiple of this many bytes long.
PAD_TO = 32

_ALPHABET = string.ascii_letters + string.digits
#: ``PADDING[r]``: the padding of a delta of ``r`` bytes more than a multiple of ``PAD_TO``
#: (``PAD_TO - r`` characters; a whole ``PAD_TO`` for ``r == 0``: never empty).
PADDING = tuple("".join(secrets.choice(_ALPHABET) for _ in range(PAD_TO - r)) for r in range(PAD_TO))
