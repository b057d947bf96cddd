"""The three fake upstreams (openai-chat, anthropic, openai-responses) that black-box tests put
orgate in front of: started together, reset around each test, one model per provider kind."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tests.fakes._base import LoopbackFake
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.fakes.responses_upstream import FakeResponses
from tests.support.configs import model_block

#: Model name (and key of the fakes dict) → provider kind and the upstream model it names.
KINDS = {
    "chat": ("openai-chat", "m"),
    "anth": ("anthropic", "claude-x"),
    "resp": ("openai-responses", "gpt-x"),
}


@contextmanager
def three_fakes() -> Iterator[dict[str, LoopbackFake]]:
    """The three fakes, running in threads, keyed ``chat``, ``anth``, ``resp``."""
    with (
        FakeOpenAIChat.start_in_thread() as chat,
        FakeAnthropic.start_in_thread() as anth,
        FakeResponses.start_in_thread() as resp,
    ):
        yield {"chat": chat, "anth": anth, "resp": resp}


@contextmanager
def fresh(fakes: dict[str, LoopbackFake]) -> Iterator[dict[str, LoopbackFake]]:
    """The fakes with no scripts or recorded bodies left, before and after the block."""
    for fake in fakes.values():
        fake.reset()
    yield fakes
    for fake in fakes.values():
        fake.reset()


def provider_models(
    fakes: dict[str, LoopbackFake],
    *,
    api_key: str,
    read_timeout: float,
    upstream_model: str | None = None,
) -> str:
    """One model per fake, named like its key (``chat``, ``anth``, ``resp``)."""
    return "".join(
        model_block(
            name,
            kind,
            fakes[name].base_url,
            upstream_model or upstream,
            api_key=api_key,
            read_timeout=read_timeout,
        )  # type: ignore[attr-defined]
        for name, (kind, upstream) in KINDS.items()
    )


def thinking_models(fakes: dict[str, LoopbackFake], *, api_key: str, read_timeout: float) -> str:
    """``anth-think`` and ``resp-think``: the anthropic and openai-responses fakes as reasoning
    models."""
    thinking = "capabilities = { reasoning = true }"
    return model_block(
        "anth-think",
        "anthropic",
        fakes["anth"].base_url,
        "claude-x",
        api_key=api_key,
        read_timeout=read_timeout,
        extra=thinking,  # type: ignore[attr-defined]
    ) + model_block(
        "resp-think",
        "openai-responses",
        fakes["resp"].base_url,
        "gpt-x",
        api_key=api_key,
        read_timeout=read_timeout,
        extra=thinking,  # type: ignore[attr-defined]
    )
