"""Compressed request bodies against a real ``orgate serve``: zstd (as Codex sends them), gzip
and deflate are served; ``limits.max_body_bytes`` bounds the decompressed size, so a
compression bomb is a 413 and the server's memory never holds more than that limit.

The bomb test reads the server's peak resident memory (``VmHWM`` in ``/proc/PID/status``)
after a gigabyte of zeros, zstd-compressed to 32 KiB, was refused: it stays under 300 MB.
Decompressing the bomb whole (what a server that inflates before checking does) would
need a gigabyte.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

try:
    from compression import zstd  # type: ignore[import-not-found,unused-ignore]
except ImportError:
    from backports import zstd  # type: ignore[no-redef,unused-ignore]

from tests.hardening.conftest import assert_error, server_env
from tests.server_process import OrgateServer

BODY = orjson.dumps({"model": "orgate/echo", "input": "compressed hello"})
# Codex's request headers for a compressed body (codex-client: zstd level 3, JSON).
CODEX = {"Content-Type": "application/json", "Content-Encoding": "zstd"}
PEAK_BUDGET = 300 * 1024 * 1024


@pytest.fixture(scope="module")
def server() -> Iterator[OrgateServer]:
    config = "[endpoints]\nchat_completions = { enabled = true }\n"
    with OrgateServer(config, env=server_env()) as running:
        yield running


@pytest.fixture
def http(server: OrgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=120) as client:
        yield client


def _zstd(data: bytes) -> bytes:
    return zstd.compress(data, 3)


def _zstd_zeros(size: int) -> bytes:
    """``size`` zero bytes as one zstd frame, compressed piece by piece (never held whole)."""
    compressor = zstd.ZstdCompressor(level=3)
    piece = bytes(8 << 20)
    parts = [compressor.compress(piece) for _ in range(size // len(piece))]
    parts.append(compressor.flush())
    return b"".join(parts)


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory in bytes (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


def _text(response: dict[str, object]) -> str:
    output = response["output"]
    assert isinstance(output, list)
    return "".join(
        part["text"] for item in output for part in item["content"] if part["type"] == "output_text"
    )


def test_a_zstd_body_as_codex_sends_it_is_served(http: httpx.Client) -> None:
    res = http.post("/v1/responses", content=_zstd(BODY), headers=CODEX)
    assert res.status_code == 200, res.text
    assert _text(res.json()) == "compressed hello"


def test_a_zstd_body_streams(http: httpx.Client) -> None:
    body = orjson.dumps({**orjson.loads(BODY), "stream": True})
    with http.stream("POST", "/v1/responses", content=_zstd(body), headers=CODEX) as res:
        assert res.status_code == 200
        text = res.read().decode()
    assert "response.completed" in text and "compressed" in text


@pytest.mark.parametrize(
    ("encoding", "data"),
    [
        ("gzip", gzip.compress(BODY)),
        ("x-gzip", gzip.compress(BODY)),
        ("deflate", zlib.compress(BODY)),  # RFC 9110's deflate: zlib-wrapped
        ("deflate", zlib.compress(BODY)[2:-4]),  # raw deflate, as some clients send it
        ("zstd", _zstd(BODY[:20]) + _zstd(BODY[20:])),  # two frames
        ("ZSTD", _zstd(BODY)),
    ],
    ids=["gzip", "x-gzip", "deflate", "raw-deflate", "zstd-two-frames", "zstd-upper-case"],
)
def test_other_codings_are_served(http: httpx.Client, encoding: str, data: bytes) -> None:
    headers = {"Content-Type": "application/json", "Content-Encoding": encoding}
    res = http.post("/v1/responses", content=data, headers=headers)
    assert res.status_code == 200, res.text
    assert _text(res.json()) == "compressed hello"


def test_the_chat_adapter_and_the_compaction_route_take_zstd_too(http: httpx.Client) -> None:
    chat = orjson.dumps({"model": "orgate/echo", "messages": [{"role": "user", "content": "yo"}]})
    res = http.post("/v1/chat/completions", content=_zstd(chat), headers=CODEX)
    assert res.status_code == 200, res.text
    res = http.post("/v1/responses/compact", content=_zstd(BODY), headers=CODEX)
    assert res.status_code == 200, res.text


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (_zstd(BODY)[:-4], "cut short"),
        (b"\x28\xb5\x2f\xfd" + bytes(40), "corrupt"),
        (BODY, "not compressed at all"),
    ],
    ids=["truncated", "corrupt", "plain"],
)
def test_a_broken_zstd_body_is_400(http: httpx.Client, data: bytes, what: str) -> None:
    res = http.post("/v1/responses", content=data, headers=CODEX)
    assert_error(res, 400, "invalid_compressed_body")


def test_a_zstd_frame_asking_for_a_huge_window_is_400(http: httpx.Client) -> None:
    """RFC 8878 caps an HTTP zstd window at 8 MiB: a frame that asks for 128 MiB is refused,
    not allocated."""
    compressor = zstd.ZstdCompressor(options={zstd.CompressionParameter.window_log: 27})
    data = compressor.compress(BODY) + compressor.flush()
    error = assert_error(
        http.post("/v1/responses", content=data, headers=CODEX), 400, "invalid_compressed_body"
    )
    assert "memory" in error["message"]


def test_a_gigabyte_zstd_bomb_is_413_and_the_memory_stays_bounded(
    server: OrgateServer, http: httpx.Client
) -> None:
    bomb = _zstd_zeros(1 << 30)
    assert len(bomb) < 64 * 1024  # a gigabyte in a few dozen kilobytes
    assert server.proc is not None
    res = http.post("/v1/responses", content=bomb, headers=CODEX)
    error = assert_error(res, 413, "request_too_large")
    assert "decompressed" in error["message"] and "limits.max_body_bytes" in error["message"]
    peak = _peak_rss(server.proc.pid)
    assert peak < PEAK_BUDGET, f"peak RSS {peak / 2**20:.0f} MiB"
    # and it goes on serving
    assert http.post("/v1/responses", content=_zstd(BODY), headers=CODEX).status_code == 200


def test_a_gzip_bomb_is_413(http: httpx.Client) -> None:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    piece = bytes(8 << 20)
    bomb = b"".join(compressor.compress(piece) for _ in range(16)) + compressor.flush()
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    assert_error(http.post("/v1/responses", content=bomb, headers=headers), 413)
