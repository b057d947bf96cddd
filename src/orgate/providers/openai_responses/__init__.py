"""The ``openai-responses`` provider: a native Responses API upstream
(``POST {base_url}/responses``).

OpenAI, vLLM, Ollama or another orgate. Split into a pure mapping
(``build_body``), pure decoders (``StreamDecoder``, ``decode_response``), an
error mapping and one small I/O class (``OpenAIResponsesProvider``).
"""

from orgate.providers.openai_responses.decoder import StreamDecoder, decode_response
from orgate.providers.openai_responses.errors import failed_error, http_error, stream_error
from orgate.providers.openai_responses.mapping import build_body
from orgate.providers.openai_responses.provider import OpenAIResponsesProvider, responses_url

__all__ = [
    "OpenAIResponsesProvider",
    "StreamDecoder",
    "build_body",
    "decode_response",
    "failed_error",
    "http_error",
    "responses_url",
    "stream_error",
]
