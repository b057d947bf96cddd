"""No secret in a log line, at any level: the redaction every log record goes through.

``RedactingFormatter`` wraps the handler's formatter. Before formatting, the
value of a credential header in a message — ``authorization``,
``proxy-authorization``, ``x-api-key``, ``api-key``, ``cookie``,
``set-cookie`` and the names of the configured upstream ``headers`` — is
replaced, whatever the form (``name: value`` as a WebSocket handshake logs it
at debug, ``'name': 'value'`` from a dict's repr, ``name=value``); after it,
every known secret (client keys, upstream API keys, configured header values,
the compaction secret, passwords in the store and Redis URLs) is replaced
wherever it appears in the line, tracebacks and fields included. The
replacement is ``[redacted]``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

REDACTED = "[redacted]"
CREDENTIAL_HEADERS = (
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "cookie",
    "set-cookie",
)
# A secret shorter than this is not searched for in lines: it would match ordinary text.
MIN_SECRET = 6


def _header_pattern(names: Iterable[str]) -> re.Pattern[str]:
    alternatives = "|".join(sorted({re.escape(n.lower()) for n in names}, key=len, reverse=True))
    # name, its closing quote if quoted, a separator, then the value: quoted, or to the end of
    # the header (line end, or what ends a value in a repr / a field list)
    return re.compile(
        rf"(?i)(?<![\w-])({alternatives})(['\"]?\s*[:=]\s*)('[^']*'|\"[^\"]*\"|[^\r\n'\",}}\]]+)"
    )


class Redactor:
    """Header values and known secrets out of a text; secrets are added as they are resolved."""

    def __init__(self) -> None:
        self._secrets: tuple[str, ...] = ()
        self._headers = _header_pattern(CREDENTIAL_HEADERS)

    def add_secrets(self, secrets: Iterable[str | None]) -> None:
        known = set(self._secrets)
        known.update(s for s in secrets if s and len(s) >= MIN_SECRET)
        # longest first: a secret that contains another is replaced whole
        self._secrets = tuple(sorted(known, key=len, reverse=True))

    def add_headers(self, names: Iterable[str]) -> None:
        self._headers = _header_pattern([*CREDENTIAL_HEADERS, *names])

    def headers(self, text: str) -> str:
        """``text`` with the value of every credential header replaced."""
        return self._headers.sub(_keep_name, text)

    def secrets(self, text: str) -> str:
        """``text`` with every known secret replaced."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def __call__(self, text: str) -> str:
        return self.secrets(self.headers(text))


def _keep_name(match: re.Match[str]) -> str:
    value = match.group(3)
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match.group(1)}{match.group(2)}{quote}{REDACTED}{quote}"


class RedactingFormatter(logging.Formatter):
    """The handler's formatter, with the record's message and traceback redacted first and the
    whole line (fields, JSON) searched for known secrets last."""

    def __init__(self, inner: logging.Formatter, redactor: Redactor) -> None:
        super().__init__()
        self.inner = inner
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        cleaned = self.redactor(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self.redactor(self.inner.formatException(record.exc_info))
        return self.redactor.secrets(self.inner.format(record))


def url_password(url: str | None) -> str | None:
    """The password in a ``scheme://user:password@host`` URL, if any."""
    if not url or "@" not in url:
        return None
    try:
        return urlsplit(url).password
    except ValueError:
        return None


#: The process's one redactor (installed on the root handler by ``configure_logging``).
REDACTOR = Redactor()

__all__ = [
    "CREDENTIAL_HEADERS",
    "REDACTED",
    "REDACTOR",
    "RedactingFormatter",
    "Redactor",
    "url_password",
]
