"""The ``openai-chat`` provider: any OpenAI-compatible Chat Completions upstream.

OpenAI, vLLM, Ollama, llama.cpp, LM Studio, Groq, Together, OpenRouter,
Gemini's compatible endpoint... are configuration of this one adapter. It is
split into a pure mapping (``build_body``), pure decoders
(``ChatStreamDecoder``, ``decode_completion``), an error mapping and one small
I/O class (``OpenAIChatProvider``).
"""

from orgate.providers.openai_chat.decoder import ChatStreamDecoder, decode_completion
from orgate.providers.openai_chat.errors import http_error, stream_error
from orgate.providers.openai_chat.mapping import ChatOptions, build_body
from orgate.providers.openai_chat.provider import OpenAIChatProvider, completions_url

__all__ = [
    "ChatOptions",
    "ChatStreamDecoder",
    "OpenAIChatProvider",
    "build_body",
    "completions_url",
    "decode_completion",
    "http_error",
    "stream_error",
]
