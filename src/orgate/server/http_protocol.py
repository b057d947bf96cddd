"""uvicorn's httptools protocol with a bounded request head and spec-shaped errors of its own.

httptools buffers a request line and header values without a bound, and
joins the pieces of one header value by concatenation: a client sending one
endless header made the server's memory grow and blocked its event loop for
seconds (quadratic copying; 64 MB took ~9 s during which no one was served).
``OrgateHttpProtocol`` counts the bytes of each request head and answers 431
once it passes ``MAX_HEAD_BYTES``: the request line and each header as the
parser hands them over (so a large head that arrives in one read is refused
before the app sees it), and the reads that follow the one that started a
head (a header that never ends is never handed over). The answers uvicorn gives without the app
(431 here, 400 for malformed HTTP) are in the spec's ``{"error": {...}}``
shape. After such an answer the connection is half-closed and what the
client still sends is discarded for a moment before closing, so that the
client reads the answer rather than a connection reset.

uvicorn has no header timeout either: a connection that sends nothing, or a
request head that never ends (slowloris), held its socket forever. A new
connection now has ``header_timeout`` seconds to start a request (else it is
closed), and a head that does not end in the read that started it has
``header_timeout`` seconds from then to end (else 408); a head that arrives in
one read, the usual case, costs no timer. Between requests uvicorn's own
keep-alive timeout closes idle connections.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from typing import Any, cast

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from orgate.protocol.errors import ErrorCode

#: The largest request head (request line and headers) accepted: 431 above.
MAX_HEAD_BYTES = 64 * 1024
#: Seconds a refused connection keeps draining the client's bytes before it is closed.
LINGER_SECONDS = 2.0
#: Seconds for a request head, unless the server passes its ``[limits] header_timeout``.
HEADER_TIMEOUT = 30.0


def error_bytes(
    code: ErrorCode, message: str, default_headers: Iterable[tuple[bytes, bytes]] = ()
) -> bytes:
    """A whole HTTP/1.1 response of ``code``'s status with a spec-shaped error body that closes
    the connection."""
    body = orjson.dumps(
        {"error": {"message": message, "type": code.type, "param": None, "code": code.value}}
    )
    head = b"".join(name + b": " + value + b"\r\n" for name, value in default_headers)
    # Every answer carries an id (docs/operations.md), these too:
    # the request's own cannot be trusted.
    head += b"x-request-id: " + os.urandom(16).hex().encode() + b"\r\n"
    head += (
        b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        % len(body)
    )
    return STATUS_LINE[code.status] + head + body


class _HeadTooLarge(Exception):
    """Raised from a parser callback: stops the parser before the request reaches the app."""


class OrgateHttpProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` with ``MAX_HEAD_BYTES`` and JSON error bodies
    (``uvicorn.run(http=...)``)."""

    def __init__(self, *args: Any, header_timeout: float = HEADER_TIMEOUT, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = False  # between the first byte of a request and the end of its headers
        self._head_bytes = 0  # the reads after the one that started the head
        self._parsed_head = 0  # the request line and the headers the parser handed over
        self._refused = False
        self._header_timeout = header_timeout
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream protocol is always handed a Transport (uvicorn's annotation says so)
        super().connection_made(cast(asyncio.Transport, transport))
        self._arm_head_timer()  # a connection that never sends a request does not stay open

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0
        self._parsed_head = 0
        # the connection's first wait is over; a head not complete in this read gets its own
        self._disarm_head_timer()

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)  # with ": " and the line end
        super().on_header(name, value)

    def _count_head(self, size: int) -> None:
        self._parsed_head += size
        if self._parsed_head > MAX_HEAD_BYTES:
            raise _HeadTooLarge

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._disarm_head_timer()
        super().on_headers_complete()

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(self._header_timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._refused or self.transport.is_closing():
            return
        if not self._in_head:
            # The connection's first wait (the only timer armed outside a head): no request came.
            self.transport.close()
            return
        self.logger.warning(
            "Request head not received within %g seconds: 408.", self._header_timeout
        )
        message = (
            f"The request line and headers did not arrive within {self._header_timeout:g} "
            "seconds (limits.header_timeout)."
        )
        self._refuse(
            error_bytes(ErrorCode.REQUEST_TIMEOUT, message, self.server_state.default_headers)
        )

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # draining until the connection closes
        # The read that started a head is counted by the parser callbacks; the reads after it
        # here too, as a header that never ends is not handed over (bounded memory and copying).
        counted = self._in_head
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _HeadTooLarge):
                self._refuse_large_head()
                return
            self._invalid()
            return
        except httptools.HttpParserError:
            self._invalid()
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        if self._in_head and self._head_timer is None and not self._refused:
            # A head that did not end in the read that started it (usually it does: no timer then).
            self._arm_head_timer()
        if counted and self._in_head and not self._refused:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse_large_head()

    def _invalid(self) -> None:
        msg = "Invalid HTTP request received."
        self.logger.warning(msg)
        self.send_400_response(msg)

    def _refuse_large_head(self) -> None:
        self.logger.warning("Request head larger than %d bytes refused.", MAX_HEAD_BYTES)
        message = f"The request line and headers are larger than {MAX_HEAD_BYTES} bytes."
        self._refuse(
            error_bytes(
                ErrorCode.REQUEST_HEADER_FIELDS_TOO_LARGE,
                message,
                self.server_state.default_headers,
            )
        )

    def send_400_response(self, msg: str) -> None:
        self._refuse(
            error_bytes(ErrorCode.INVALID_HTTP_REQUEST, msg, self.server_state.default_headers)
        )

    def _refuse(self, response: bytes) -> None:
        """Answer, half-close, discard what follows, and close after ``LINGER_SECONDS``."""
        self._refused = True
        transport = self.transport
        if transport.is_closing():
            return
        transport.write(response)
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = (
                True  # a request of this connection still running: its client is gone
            )
            self.cycle.message_event.set()
        try:
            transport.write_eof()
        except (NotImplementedError, OSError, RuntimeError):
            transport.close()
            return
        self.loop.call_later(LINGER_SECONDS, transport.close)
