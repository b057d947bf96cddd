"""Prometheus metrics, upstream instrumentation, log formats and optional tracing.

``HttpMetrics`` holds the gateway's own series, which the access log middleware
(``middleware.py``) records per request.
``instrument_providers()`` is a ``ProviderRegistry(wrap=...)`` hook that times
every upstream call by deployment, counts its errors and the tokens of its
``Finish`` usage, and charges those tokens to the caller's rate limit.

Log lines from deeper layers carry the id of the current request
(``request_state.current_request``; ``JsonFormatter`` and ``TextFormatter`` add it).

Tracing (``[tracing] enabled = true``) imports OpenTelemetry only when enabled:
with tracing off nothing of it is imported.
"""

from __future__ import annotations

import logging
import re
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client import CollectorRegistry

from orgate.neutral import (
    Deployment,
    Finish,
    Ledger,
    ModelEvent,
    ModelRequest,
    Provider,
    WrapperProvider,
    aclose,
)
from orgate.protocol.errors import ApiError
from orgate.server.local_metrics import LocalCounter, LocalGauge, LocalHistogram
from orgate.server.log_redaction import REDACTOR, RedactingFormatter
from orgate.server.request_state import RequestState, current_request

if TYPE_CHECKING:
    from orgate.server.ratelimit import RateLimiter

upstream_log = logging.getLogger("orgate.upstream")

#: Distinct upstream error codes given their own label value (see ``HttpMetrics.error_label``).
MAX_ERROR_CODES = 64
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")

LATENCY_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)


class HttpMetrics:
    """The gateway's own Prometheus series, registered on the app's registry (lock-free:
    ``local_metrics``)."""

    def __init__(self, registry: CollectorRegistry, known_models: Iterable[str] = ()) -> None:
        self.known_models = frozenset(known_models)
        self.requests = LocalCounter(
            "orgate_http_requests",
            "HTTP requests by route template, method, status and model.",
            ["route", "method", "status", "model"],
            registry=registry,
        )
        self.duration = LocalHistogram(
            "orgate_http_request_duration_seconds",
            "Time from the request's arrival to its last body byte (whole stream for SSE).",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.first_chunk = LocalHistogram(
            "orgate_stream_time_to_first_chunk_seconds",
            "Streams: time from the request's arrival to the first body chunk after the headers.",
            ["route", "model"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.upstream_duration = LocalHistogram(
            "orgate_upstream_duration_seconds",
            "Upstream calls: time from the call to its end, by deployment and outcome "
            "(ok, error, cancelled).",
            ["deployment", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.upstream_first = LocalHistogram(
            "orgate_upstream_time_to_first_event_seconds",
            "Upstream calls: time to the first model event, by deployment.",
            ["deployment"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.upstream_errors = LocalCounter(
            "orgate_upstream_errors",
            "Upstream calls that failed, by deployment and error code.",
            ["deployment", "code"],
            registry=registry,
        )
        self.tokens = LocalCounter(
            "orgate_tokens",
            "Tokens reported by upstreams, by deployment and direction (input, output).",
            ["deployment", "direction"],
            registry=registry,
        )
        self.translations = LocalCounter(
            "orgate_translations",
            "Translation ledger entries of answered upstream calls, by code and kind "
            "(mapped, approximated, dropped): docs/translation.md.",
            ["code", "kind"],
            registry=registry,
        )
        self.rate_limited = LocalCounter(
            "orgate_rate_limited",
            "Requests refused with 429 by the per-key limits, by key name.",
            ["key"],
            registry=registry,
        )
        self.in_flight = LocalGauge(
            "orgate_http_requests_in_flight",
            "HTTP requests being served (streams until their last byte).",
            registry=registry,
        )
        self.upstream_in_flight = LocalGauge(
            "orgate_upstream_requests_in_flight",
            "Upstream calls running, by deployment.",
            ["deployment"],
            registry=registry,
        )
        # Children kept by their full label set (one lookup per request;
        # the label sets are bounded).
        self._children: dict[tuple[str, ...], tuple[Any, Any]] = {}
        self._error_codes: set[str] = set()

    def request_children(self, route: str, method: str, status: str, model: str) -> tuple[Any, Any]:
        key = (route, method, status, model)
        children = self._children.get(key)
        if children is None:
            children = (
                self.requests.labels(route, method, status, model),
                self.duration.labels(route, method),
            )
            self._children[key] = children
        return children

    def error_label(self, code: str) -> str:
        """An upstream error code as a label value: bounded, since an upstream's ``response.failed``
        passes its own code on (the first ``MAX_ERROR_CODES`` well-formed codes, then ``other``)."""
        seen = self._error_codes
        if code in seen:
            return code
        if len(seen) >= MAX_ERROR_CODES or not _ERROR_CODE.fullmatch(code):
            return "other"
        seen.add(code)
        return code

    def count_translations(self, ledger: Ledger) -> None:
        """One answered call's ledger entries, by code (the catalogue bounds the labels)."""
        for entry in ledger:
            code = entry.code
            self.translations.labels(code.value, code.kind).inc()

    def model_label(self, model: str | None) -> str:
        """Client-chosen names become labels only when configured: no unbounded label sets."""
        if model is None:
            return ""
        return model if model in self.known_models else "other"


def server_span_kind() -> Any:
    from opentelemetry.trace import SpanKind  # only reached with tracing on

    return SpanKind.SERVER


# --- upstream instrumentation ---------------------------------------------------------------------


class InstrumentedProvider(WrapperProvider):
    """Wraps one deployment's provider: latency, errors and tokens by deployment;
    tokens charged to the caller."""

    def __init__(
        self,
        inner: Provider,
        deployment: Deployment,
        metrics: HttpMetrics,
        limiter: RateLimiter | None,
    ) -> None:
        super().__init__(inner)
        self.deployment = deployment
        self.metrics = metrics
        self.limiter = limiter
        # Label children looked up once: the deployment never changes (labels() takes a lock).
        name = deployment.name
        self._first = metrics.upstream_first.labels(name)
        self._duration = {
            outcome: metrics.upstream_duration.labels(name, outcome)
            for outcome in ("ok", "error", "cancelled")
        }
        self._tokens_in = metrics.tokens.labels(name, "input")
        self._tokens_out = metrics.tokens.labels(name, "output")
        self._in_flight = metrics.upstream_in_flight.labels(name)

    def stream_batches(self, request: ModelRequest) -> _MeasuredBatches:
        """The inner provider's batches, measured (batches keep one write per upstream read)."""
        info = current_request()
        if info is not None:
            info.deployment = self.deployment.name
            if info.model is None:
                info.model = self.deployment.name
        return _MeasuredBatches(self, self.inner.stream_batches(request), info, request.ledger)

    async def _count(self, event: Finish, info: RequestState | None) -> None:
        usage = event.usage
        assert usage is not None
        self._tokens_in.inc(usage.input_tokens)
        self._tokens_out.inc(usage.output_tokens)
        if self.limiter is not None and info is not None and info.key_name is not None:
            await self.limiter.charge(info.key_name, usage.input_tokens + usage.output_tokens)


class _MeasuredBatches:
    """One upstream call's batches, measured: latency to the first batch, the call's duration by
    outcome (``ok``, ``error``, ``cancelled``: ended before its answer), errors, tokens, and
    the in-flight gauge.

    An async iterator object rather than an async generator: one generator layer less for every
    batch of every response (the hot path), with the same ending: ``aclose()`` (which every
    consumer calls) records the call and closes the inner stream, which cancels its HTTP request
    when the client went away.
    """

    __slots__ = (
        "_owner",
        "_inner",
        "_info",
        "_ledger",
        "_started",
        "_first",
        "_outcome",
        "_ended",
    )

    def __init__(
        self,
        owner: InstrumentedProvider,
        inner: AsyncIterator[list[ModelEvent]],
        info: RequestState | None,
        ledger: Ledger,
    ) -> None:
        self._ended = False
        self._ledger = ledger  # counted by code once the upstream answered (its Finish)
        self._owner = owner
        self._inner = inner
        self._info = info
        self._first = True
        self._outcome = "cancelled"
        self._started: float | None = (
            None  # the call starts with the first batch asked for (a background
        )
        # response's stream is created when it is queued, and iterated when it runs)

    def __aiter__(self) -> _MeasuredBatches:
        return self

    async def __anext__(self) -> list[ModelEvent]:
        if self._ended:
            raise StopAsyncIteration
        owner = self._owner
        started = self._started
        if started is None:
            owner._in_flight.inc()
            started = self._started = time.perf_counter()
        try:
            batch = await self._inner.__anext__()
            if self._first:
                owner._first.observe(time.perf_counter() - started)
                self._first = False
            if batch:
                last = batch[-1]
                if isinstance(last, Finish):
                    self._outcome = "ok"
                    if self._ledger:
                        owner.metrics.count_translations(self._ledger)
                    if last.usage is not None:
                        await owner._count(last, self._info)
            return batch
        except StopAsyncIteration:
            self._end("ok")
            raise
        except ApiError as exc:
            metrics = owner.metrics
            metrics.upstream_errors.labels(
                owner.deployment.name, metrics.error_label(exc.code or str(exc.status))
            ).inc()
            self._end("error")
            self._log_failure(exc.status, exc.code, exc.message)
            raise
        except Exception as exc:
            owner.metrics.upstream_errors.labels(owner.deployment.name, type(exc).__name__).inc()
            self._end("error")
            self._log_failure(None, type(exc).__name__, str(exc))
            raise

    def _log_failure(self, status: int | None, code: str | None, message: str) -> None:
        """A failed upstream call at warning: the client got an error, the operator sees why."""
        info = self._info
        deployment = self._owner.deployment
        fields = {
            "event": "upstream_error",
            "model": info.model if info is not None else None,
            "deployment": deployment.name,
            "status": status,
            "code": code,
            "request_id": info.request_id if info is not None else None,
        }
        upstream_log.warning(
            "upstream %s failed: %s %s: %s",
            deployment.name,
            status or "-",
            code or "-",
            message[:300],
            extra={"orgate": fields},
        )

    def _end(self, outcome: str) -> None:
        if not self._ended:
            self._ended = True
            if self._started is not None:
                self._owner._in_flight.dec()
                self._owner._duration[outcome].observe(time.perf_counter() - self._started)

    async def aclose(self) -> None:
        """Record the call (``cancelled`` if it ended before its answer) and close the inner
        stream."""
        self._end(self._outcome)
        await aclose(self._inner)

    def __del__(self) -> None:
        # A consumer that dropped the stream without aclose(): the gauge must not stay up.
        if not self._ended:
            self._end(self._outcome)


def instrument_providers(
    metrics: HttpMetrics,
    limiter: RateLimiter | None = None,
    inner: Callable[[Provider, Deployment], Provider] | None = None,
) -> Callable[[Provider, Deployment], Provider]:
    """A ``ProviderRegistry(wrap=...)`` hook (composes with another hook given as ``inner``)."""

    def wrap(provider: Provider, deployment: Deployment) -> Provider:
        if inner is not None:
            provider = inner(provider, deployment)
        return InstrumentedProvider(provider, deployment, metrics, limiter)

    return wrap


# --- logging --------------------------------------------------------------------------------------

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "orgate",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, request_id
    (when inside a request) and fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "orgate", None)
        if isinstance(fields, dict):
            entry.update(fields)
        else:
            info = current_request()
            if info is not None:
                entry["request_id"] = info.request_id
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in entry and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = (
                record.exc_text or "".join(traceback.format_exception(*record.exc_info)).rstrip()
            )
        return orjson.dumps(entry, default=str).decode()


_UNSAFE_TEXT = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_NEEDS_QUOTES = re.compile(r"[\s\"=\x00-\x1f\x7f\u2028\u2029]")


def _escape_control(match: re.Match[str]) -> str:
    return orjson.dumps(match.group())[1:-1].decode()


def _text_value(value: object) -> str:
    """A ``key=value`` value that cannot end the line or fake another field:
    JSON-quoted when needed."""
    text = str(value)
    if not text or _NEEDS_QUOTES.search(text):
        return orjson.dumps(text).decode()
    return text


class TextFormatter(logging.Formatter):
    """The classic one-line format, with the request's fields appended as ``key=value``.

    Client-chosen text (a model name, a path in an error message) cannot forge a log line:
    line breaks and other control characters in the message are escaped, and a field value
    with spaces, quotes, ``=`` or control characters is written as a JSON string.
    """

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging.Formatter's name
        record.message = _UNSAFE_TEXT.sub(_escape_control, record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "orgate", None)
        if isinstance(fields, dict):
            extras = " ".join(
                f"{k}={_text_value(v)}"
                for k, v in fields.items()
                if k not in ("method", "route", "status", "duration_ms", "body")
            )
            line = f"{line} {extras}"
            if "body" in fields:
                line += " body=" + orjson.dumps(fields["body"]).decode()
        else:
            info = current_request()
            if info is not None:
                line += f" request_id={info.request_id}"
        return line


def configure_logging(level: str, log_format: str, access_log: bool = True) -> None:
    """Root handler on stderr with the chosen format, every line redacted (``log_redaction``);
    ``orgate.access`` on or off."""
    handler = logging.StreamHandler()
    inner = JsonFormatter() if log_format == "json" else TextFormatter()
    handler.setFormatter(RedactingFormatter(inner, REDACTOR))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("orgate.access").setLevel(logging.INFO if access_log else logging.WARNING)


# --- tracing --------------------------------------------------------------------------------------


def setup_tracing(enabled: bool, service_name: str = "orgate", endpoint: str | None = None) -> Any:
    """An OpenTelemetry tracer when enabled, else None (and nothing of OpenTelemetry is
    imported)."""
    if not enabled:
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise SystemExit(
            f"orgate: [tracing] enabled = true needs OpenTelemetry ({exc.name}): pip "
            "install 'orgate[otel]'"
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    exporter = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return trace.get_tracer("orgate")


__all__ = [
    "HttpMetrics",
    "InstrumentedProvider",
    "JsonFormatter",
    "TextFormatter",
    "configure_logging",
    "instrument_providers",
    "server_span_kind",
    "setup_tracing",
]
