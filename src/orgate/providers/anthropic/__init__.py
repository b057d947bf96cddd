"""The ``anthropic`` provider: the Anthropic Messages API (``POST {base_url}/v1/messages``).

Split into a pure mapping (``build_body``), pure decoders (``StreamDecoder``,
``decode_message``), an error mapping (``http_error``, ``stream_error``), the
thinking round-trip envelope (``envelope``) and one small I/O class
(``AnthropicProvider``).
"""

from orgate.providers.anthropic.decoder import StreamDecoder, decode_message
from orgate.providers.anthropic.envelope import decode_blocks, encode_blocks, is_anthropic_reasoning
from orgate.providers.anthropic.errors import http_error, stream_error
from orgate.providers.anthropic.mapping import build_body
from orgate.providers.anthropic.provider import ANTHROPIC_VERSION, AnthropicProvider, messages_url

__all__ = [
    "ANTHROPIC_VERSION",
    "AnthropicProvider",
    "StreamDecoder",
    "build_body",
    "decode_blocks",
    "decode_message",
    "encode_blocks",
    "http_error",
    "is_anthropic_reasoning",
    "messages_url",
    "stream_error",
]
