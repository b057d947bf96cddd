"""The ``orgate`` command: ``serve`` and the tools (``gate``, ``diff``, ``store``, ``schema``, ``review``).

``orgate serve [--config FILE] [--host H] [--port P]`` loads the settings,
prints a start-up banner (URL, models, API key if one was generated, and
copy-pasteable ``curl`` and ``openai`` SDK examples) and runs one uvicorn
worker on uvloop + httptools.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

from orgate import __version__
from orgate.gate import cli as gate_cli

# The server, config and structured-output modules take about a second to import:
# they are imported where used, so `orgate gate` / `orgate diff` start in a fraction of it.
if TYPE_CHECKING:
    from orgate.config import Settings
    from orgate.server.app import Services

log = logging.getLogger("orgate")


def _banner_url(settings: Settings) -> str:
    """The URL clients use: ``public_url``, else the listen address (a wildcard one as loopback)."""
    if settings.server.public_url:
        return settings.server.public_url.rstrip("/")
    host = settings.server.host
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    return f"http://{host}:{settings.server.port}"


def _banner(settings: Settings, services: Services) -> str:
    url = _banner_url(settings)
    key = services.keys[0]
    from_env = bool(os.environ.get("ORGATE_API_KEY"))  # always accepted when set
    if key.generated and key.secret is not None:
        key_line = f"  API key:   {key.secret.decode()}  (generated for this run; set ORGATE_API_KEY to choose one)"
        curl_key, sdk_key, sdk_import = key.secret.decode(), f'"{key.secret.decode()}"', ""
        hint = ""
    else:
        key_line = "  API key:   $ORGATE_API_KEY (from the environment)" if from_env else "  API key:   from your configuration"
        # the examples read the key from the shell: a variable inside single quotes would be sent as written
        curl_key, sdk_key, sdk_import = "$ORGATE_API_KEY", 'os.environ["ORGATE_API_KEY"]', "import os; "
        hint = "" if from_env else "  # first: export ORGATE_API_KEY=<one of your configured keys>\n"
    models = ", ".join(sorted(services.deployments)) or "(none)"
    first_model = "orgate/echo" if "orgate/echo" in services.deployments else next(iter(sorted(services.deployments)), "MODEL")
    endpoints = ["/v1/responses"] if settings.endpoints.responses.enabled else []
    if settings.endpoints.chat_completions.enabled:
        endpoints.append("/v1/chat/completions (legacy)")
    return f"""
orgate {__version__} — Open Responses gateway
  URL:       {url}/v1
  Endpoints: {", ".join(endpoints) or "(none enabled)"}
  Models:    {models}
{key_line}
  Config:    {settings.source or "embedded default (no config file)"}

Try it:
{hint}  curl {url}/v1/responses \\
    -H "Authorization: Bearer {curl_key}" -H "Content-Type: application/json" \\
    -d '{{"model": "{first_model}", "input": "Hello!"}}'

  # with the openai SDK (pip install openai):
  python -c '{sdk_import}from openai import OpenAI; c = OpenAI(base_url="{url}/v1", api_key={sdk_key}); print(c.responses.create(model="{first_model}", input="Hello!").output_text)'
"""


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from orgate.config import ConfigError, apply_cli_overrides, load_settings
    from orgate.server.app import build_services, create_app
    from orgate.server.http_protocol import OrgateHttpProtocol
    from orgate.server.observability import configure_logging

    try:
        settings = load_settings(args.config)
        apply_cli_overrides(settings, host=args.host, port=args.port)
    except ConfigError as exc:
        print(f"orgate: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.server.log_level, settings.server.log_format, access_log=settings.server.access_log)
    try:
        services = build_services(settings)
    except ConfigError as exc:
        print(f"orgate: {exc}", file=sys.stderr)
        return 2
    app = create_app(settings, services=services)
    tune_gc()
    raise_open_files_limit()
    print(_banner(settings, services), flush=True)
    # uvicorn drains on SIGTERM, then re-raises the signal with the previous handler:
    # make that handler a clean exit, so that a drained shutdown exits 0 (systemd, Kubernetes).
    signal.signal(signal.SIGTERM, _exit_cleanly)
    uvicorn.run(
        app,
        host=settings.server.host,
        port=settings.server.port,
        loop="uvloop" if sys.platform != "win32" else "asyncio",
        http=OrgateHttpProtocol,  # httptools with a bounded request head and JSON error bodies
        log_level=settings.server.log_level,
        access_log=False,  # orgate.access logs one line per request instead ([server] access_log)
        log_config=None,  # uvicorn's loggers go through the root handler and its format
        server_header=False,
        proxy_headers=False,  # X-Forwarded-* are not trusted unless a deployment puts a proxy middleware in front
        ws_max_size=settings.limits.max_body_bytes + 1024,
        timeout_graceful_shutdown=settings.server.drain_timeout,
    )
    return 0


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def tune_gc() -> None:
    """Fewer, cheaper garbage collections for a request server.

    Everything loaded at start-up is moved out of the collector's view
    (``gc.freeze``), and the young generation is collected every 20,000
    allocations instead of 700: a request allocates many short-lived objects,
    and the default threshold made the collector run several times per request.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


#: Open files the server asks for: client connections, pooled upstream connections and the store.
WANTED_OPEN_FILES = 65_536


def raise_open_files_limit(wanted: int = WANTED_OPEN_FILES) -> int:
    """Raise the soft limit of open files towards ``wanted`` (never above the hard limit).

    Linux's usual soft limit (1,024) would refuse connections at about a thousand
    concurrent clients (accept fails with EMFILE); the hard limit is usually far
    higher. Returns the soft limit in force.
    """
    if resource is None:  # not on this platform (Windows)
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.debug("could not raise the open-files limit from %d", soft, exc_info=True)
    return soft


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orgate", description="Open Responses gateway.")
    parser.add_argument("--version", action="version", version=f"orgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", help="TOML config file (default: $ORGATE_CONFIG, else the embedded default)")
    serve.add_argument("--host", help="listen address (overrides [server] host)")
    serve.add_argument("--port", type=int, help="listen port (overrides [server] port)")
    serve.set_defaults(handler=cmd_serve)
    gate_cli.register(sub)
    from orgate.store import cli as store_cli
    from orgate.structured import cli as structured_cli

    store_cli.register(sub)
    structured_cli.register(sub, review_db=_review_db)
    return parser


def _gate_parser() -> argparse.ArgumentParser:
    """A parser with only ``gate`` and ``diff`` (the same arguments and help as in ``build_parser``)."""
    parser = argparse.ArgumentParser(prog="orgate", description="Open Responses gateway.")
    sub = parser.add_subparsers(dest="command", required=True)
    gate_cli.register(sub)
    return parser


def _review_db(args: argparse.Namespace) -> str:
    """The review queue of the configuration in $ORGATE_CONFIG (or the default)."""
    from orgate.config import ConfigError, load_settings
    from orgate.structured.settings import StructuredSettings

    try:
        return load_settings(None).structured.review_db
    except ConfigError:
        return StructuredSettings().review_db


def main(argv: Sequence[str] | None = None) -> int:
    first = (sys.argv[1:] if argv is None else list(argv))[:1]
    parser = _gate_parser() if first in (["gate"], ["diff"]) else build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None) or args.func
    return int(handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
