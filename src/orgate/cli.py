"""The ``orgate`` command: ``serve`` and the tools (``gate``, ``diff``, ``store``, ``schema``,
``review``, ``eval``, ``models``, ``init``, ``config``, ``completion``).

``orgate serve [--config FILE] [--host H] [--port P] [--workers N|auto]`` loads the
settings, prints a start-up banner (URL, models, API key if one was generated, and
copy-pasteable ``curl`` and ``openai`` SDK examples) and runs one uvicorn server on
uvloop + httptools, or N of them in worker processes under a supervisor
(``orgate.server.workers``).
"""

from __future__ import annotations

import argparse
import errno
import functools
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

if sys.platform != "win32":  # Windows has no rlimits
    import resource

from orgate import __version__, datadir, terminal
from orgate.terminal import CommandError, fail

# The server, config, provider and structured-output modules take about a second to import:
# each is imported by the command that uses it (``main`` builds the parser of the named command
# alone), so `--version`, a command's `--help` and the tools start in a fraction of it.
if TYPE_CHECKING:
    from starlette.applications import Starlette

    from orgate.config import Settings
    from orgate.server.services import Services
    from orgate.server.workers import WorkerContext

    #: What ``add_subparsers()`` returns: each command registers itself with it.
    Subcommands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

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
        key_line = (
            f"  API key:   {key.secret.decode()}"
            "  (generated for this run; set ORGATE_API_KEY to choose one)"
        )
        curl_key, sdk_key, sdk_import = key.secret.decode(), f'"{key.secret.decode()}"', ""
        hint = ""
    else:
        key_line = (
            "  API key:   $ORGATE_API_KEY (from the environment)"
            if from_env
            else "  API key:   from your configuration"
        )
        # the examples read the key from the shell: a variable inside single quotes would be sent
        # as written
        curl_key, sdk_key, sdk_import = (
            "$ORGATE_API_KEY",
            'os.environ["ORGATE_API_KEY"]',
            "import os; ",
        )
        hint = (
            "" if from_env else "  # first: export ORGATE_API_KEY=<one of your configured keys>\n"
        )
    models = ", ".join(sorted(services.deployments)) or "(none)"
    first_model = (
        "orgate/echo"
        if "orgate/echo" in services.deployments
        else next(iter(sorted(services.deployments)), "MODEL")
    )
    endpoints = ["/v1/responses"] if settings.endpoints.responses.enabled else []
    if settings.endpoints.chat_completions.enabled:
        endpoints.append("/v1/chat/completions (legacy)")
    sdk_command = (
        f"python -c '{sdk_import}from openai import OpenAI; "
        f'c = OpenAI(base_url="{url}/v1", api_key={sdk_key}); '
        f'print(c.responses.create(model="{first_model}", input="Hello!").output_text)\''
    )
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
  {sdk_command}
"""


def cmd_serve(args: argparse.Namespace) -> int:
    settings = _serve_settings(args)
    from orgate.server.observability import configure_logging

    # Before anything is said: warnings and refusals then come in the chosen format (JSON lines).
    configure_logging(
        settings.server.log_level, settings.server.log_format, access_log=settings.server.access_log
    )
    json_logs = settings.server.log_format == "json"
    from orgate.server.workers import worker_context

    worker = worker_context()  # set when this process is one worker of `serve --workers N`
    workers = 1 if worker else args.workers
    if worker is None:
        _warn_about_config(settings, json_logs)
    # Before the banner, so that a server that cannot start says why in one line (exit 1) instead
    # of printing a banner, then a traceback from inside uvicorn.
    problem = _start_problem(settings, checks=worker is None, workers=workers)
    if problem:
        return _refuse(problem, 1, json_logs)
    # imported once the configuration is known to be valid: a refused start-up is quicker
    from orgate.config import ConfigError
    from orgate.gateway import build_services, create_app

    try:
        services = build_services(settings)
    except ConfigError as exc:
        return _refuse(str(exc), 2, json_logs)
    try:
        sockets = (
            worker.sockets()
            if worker
            else listen_sockets(settings.server.host, settings.server.port, reuse_port=workers > 1)
        )
    except OSError as exc:
        return _refuse(_listen_refusal(settings, exc), 1, json_logs)
    settings.server.port = sockets[0].getsockname()[1]  # the port picked for `port = 0`
    if workers > 1:
        _announce(settings, services, json_logs)
        return _supervise(args, settings, services, sockets, workers)
    app = create_app(settings, services=services)
    tune_gc()
    raise_open_files_limit()
    if worker is None:
        _announce(settings, services, json_logs)
        log.info("listening on %s", ", ".join(_address(sock) for sock in sockets))
    # uvicorn drains on SIGTERM, then re-raises the signal with the previous handler:
    # make that handler a clean exit, so that a drained shutdown exits 0 (systemd, Kubernetes).
    signal.signal(signal.SIGTERM, _exit_cleanly)
    return _run_server(settings, services, app, worker, sockets)


def _serve_settings(args: argparse.Namespace) -> Settings:
    """The configuration with the command line's overrides (exit status 2 when it is invalid)."""
    from orgate.config import ConfigError, apply_cli_overrides, load_settings

    try:
        settings = load_settings(args.config)
        apply_cli_overrides(
            settings,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            log_format=args.log_format,
        )
    except ConfigError as exc:
        fail(str(exc), 2)
    return settings


def _warn_about_config(settings: Settings, json_logs: bool) -> None:
    """The configuration's warnings and literal secrets, once (by the supervisor, not each
    worker)."""
    from orgate.config.secrets import literal_secrets

    for warning in [*settings.warnings, *literal_secrets(settings)]:
        if json_logs:
            log.warning(warning, extra={"orgate": {"event": "config_warning"}})
        else:
            terminal.warning(warning)


def _start_problem(settings: Settings, *, checks: bool, workers: int) -> str | None:
    """Why the server cannot start (None when it can): the store and the review queue (``checks``:
    not again in each worker), and what several workers need."""
    problem = (_check_store(settings) or _check_review_queue(settings)) if checks else None
    if problem is None and workers > 1:
        problem = _workers_problem(settings)
    return problem


def _listen_refusal(settings: Settings, exc: OSError) -> str:
    where = f"{settings.server.host}:{settings.server.port}"
    hint = (
        " (another process listens there: choose another port with --port or [server] port)"
        if exc.errno == errno.EADDRINUSE
        else ""
    )
    return f"cannot listen on {where}: {exc.strerror or exc}{hint}"


def _run_server(
    settings: Settings,
    services: Services,
    app: Starlette,
    worker: WorkerContext | None,
    sockets: list[socket.socket],
) -> int:
    """Serve ``app`` on ``sockets`` until a signal; 0 after a clean stop, 3 when it never
    started."""
    from orgate.server.http_protocol import OrgateHttpProtocol
    from orgate.server.shutdown import DrainingServer, draining_config
    from orgate.server.workers import worker_server

    config = draining_config(
        # WebSocket and background responses drain too (server/shutdown.py)
        settings.server.drain_timeout,
        app=app,
        host=settings.server.host,
        port=settings.server.port,
        loop="uvloop" if sys.platform != "win32" else "asyncio",
        # httptools with a bounded request head, a head timeout and JSON error bodies
        http=functools.partial(OrgateHttpProtocol, header_timeout=settings.limits.header_timeout),
        log_level=settings.server.log_level,
        access_log=False,  # orgate.access logs one line per request instead ([server] access_log)
        log_config=None,  # uvicorn's loggers go through the root handler and its format
        server_header=False,
        # X-Forwarded-* are not trusted unless a deployment puts a proxy middleware in front
        proxy_headers=False,
        ws_max_size=settings.limits.max_body_bytes + 1024,
    )
    server = worker_server(config, worker, base=DrainingServer)
    server.drain = services.shutdown
    try:
        server.run(sockets=sockets)
    except KeyboardInterrupt:
        pass
    finally:
        for sock in sockets:
            sock.close()
    return 0 if server.started else 3


def _workers_problem(settings: Settings) -> str | None:
    """Why this server cannot run several workers (None when it can)."""
    from orgate.server.workers import supports_workers
    from orgate.store import sqlite_path

    url = settings.store.url or ""
    if settings.store.enabled and url.startswith("sqlite") and sqlite_path(url) == ":memory:":
        return (
            "--workers needs a store the processes share: a SQLite file or PostgreSQL,"
            " not sqlite://:memory:"
        )
    return supports_workers()


def _supervise(
    args: argparse.Namespace,
    settings: Settings,
    services: Services,
    first: list[socket.socket],
    count: int,
) -> int:
    """Run ``count`` workers of this command under a supervisor (``orgate.server.workers``)."""
    from orgate.config import ConfigError, apply_cli_overrides, load_settings
    from orgate.server.services import build_services
    from orgate.server.workers import Supervisor, bind_slots, worker_argv

    host, port = settings.server.host, settings.server.port
    try:
        slots = [
            first,
            *bind_slots(lambda p: listen_sockets(host, p, reuse_port=True), port, count - 1),
        ]
    except OSError as exc:
        return _refuse(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            1,
            settings.server.log_format == "json",
        )
    for sock in first:
        sock.listen(2048)
        sock.set_inheritable(True)
    env = dict(os.environ)
    key = services.keys[0]
    if key.generated and key.secret is not None:
        env["ORGATE_API_KEY"] = key.secret.decode()  # the one key of this run, for every worker

    def check_config() -> str | None:
        try:
            fresh = load_settings(args.config)
            apply_cli_overrides(fresh, host=args.host, port=args.port)
            build_services(fresh)
        except ConfigError as exc:
            return str(exc)
        if (fresh.server.host, fresh.server.port or port) != (host, port):
            log.warning(
                "reload: the listen address stays %s:%d (a new one needs a restart)", host, port
            )
        return None

    log.info("listening on %s with %d workers", ", ".join(_address(sock) for sock in first), count)
    supervisor = Supervisor(
        slots,
        worker_argv(args.argv, port),
        drain_timeout=settings.server.drain_timeout,
        check_config=check_config,
        env=env,
    )
    try:
        return supervisor.run()
    finally:
        for sockets in slots:
            for sock in sockets:
                sock.close()


def _address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if sock.family == socket.AF_INET6 else f"{host}:{port}"


def _refuse(message: str, status: int, json_logs: bool) -> int:
    """A start-up that cannot go on: one line, in the log's format when it is JSON."""
    if json_logs:
        log.error(message, extra={"orgate": {"event": "start_refused", "status": status}})
        return status
    fail(message, status)


def _announce(settings: Settings, services: Services, json_logs: bool) -> None:
    """The start-up banner: text on stdout, or with JSON logs a structured ``start`` event (every
    line of a JSON log stays JSON) and the text on stderr only when a person watches it."""
    if not json_logs:
        print(_banner(settings, services), flush=True)
        return
    key = services.keys[0]
    fields: dict[str, object] = {
        "event": "start",
        "version": __version__,
        "url": _banner_url(settings) + "/v1",
        "models": sorted(services.deployments),
        "config": settings.source or "embedded default",
    }
    if key.generated and key.secret is not None:
        fields["generated_api_key"] = key.secret.decode()
    log.info("orgate %s started", __version__, extra={"orgate": fields})
    if terminal.is_terminal(sys.stderr):
        print(_banner(settings, services), file=sys.stderr, flush=True)


def _check_review_queue(settings: Settings) -> str | None:
    """Why the review queue cannot be written (None when it can). With the store enabled the
    queue is in the store (``review_db`` is only read, to be imported). Without it, a configured
    ``review_db`` is created now, so that a bad path stops the start-up; the default one only
    when first used."""
    if settings.store.enabled:
        return None
    import sqlite3

    from orgate.datadir import unwritable
    from orgate.structured.review import ReviewQueue

    structured = settings.structured
    path = structured.review_path()
    if structured.review_db:
        try:
            ReviewQueue(path).create()
        except (OSError, sqlite3.Error) as exc:
            reason = getattr(exc, "strerror", None) or exc
            return f"[structured] review_db = {path}: cannot create it: {reason}"
    elif structured.uses_review():
        why = unwritable(path)
        if why:
            return (
                f"[structured] review_db (default {path}): cannot create it: {why}"
                " (set --data-dir or [structured] review_db)"
            )
    return None


def _check_store(settings: Settings) -> str | None:
    """Why the configured store cannot be opened (None when it can, or is disabled)."""
    if not settings.store.enabled:
        return None
    import asyncio

    from orgate.store import describe_url, open_store
    from orgate.store.base import StoreError

    async def probe() -> None:
        store = await open_store(settings.store.url, heartbeat_interval=0)
        await store.close()

    try:
        asyncio.run(probe())
    except (StoreError, ValueError, OSError) as exc:
        return f"cannot open the response store {describe_url(settings.store.url)}: {exc}"
    return None


def listen_sockets(host: str, port: int, *, reuse_port: bool = False) -> list[socket.socket]:
    """The bound listening sockets of ``host:port``, as asyncio's ``create_server`` would bind them
    (every address of a name, IPv6 only on its own socket); ``port = 0`` picks one port for all.
    ``reuse_port``: ``SO_REUSEPORT``, so that several sets may bind the address (workers).
    Raises ``OSError`` (address in use, not an address of this host, unknown name)."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise OSError(exc.errno, f"cannot resolve {host!r}: {exc.strerror}") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


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
    if sys.platform == "win32":  # no rlimits on this platform
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


def _add_serve(sub: Subcommands) -> None:
    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument(
        "--config", help="TOML config file (default: $ORGATE_CONFIG, else the embedded default)"
    )
    serve.add_argument("--host", help="listen address (overrides [server] host)")
    serve.add_argument("--port", type=int, help="listen port (overrides [server] port)")
    serve.add_argument(
        "--workers",
        type=_workers_count,
        default=1,
        metavar="N|auto",
        help="worker processes sharing the port (auto: one per core; default 1)",
    )
    serve.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        help="log level (overrides [server] log_level)",
    )
    serve.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="log format; json: one JSON object per line (overrides [server] log_format)",
    )
    add_data_dir_option(serve)
    serve.set_defaults(handler=cmd_serve)


def add_data_dir_option(parser: argparse.ArgumentParser) -> None:
    """``--data-dir``: where orgate keeps its files (also a top-level option)."""
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help=f"where orgate keeps its files (default: ${datadir.ENV},"
        " else $XDG_DATA_HOME/orgate, else ~/.local/share/orgate)",
    )


def _register_gate(sub: Subcommands) -> None:
    from orgate.gate import cli as gate_cli

    gate_cli.register(sub)


def _register_store(sub: Subcommands) -> None:
    from orgate.store import cli as store_cli

    store_cli.register(sub)


def _register_structured(sub: Subcommands) -> None:
    from orgate.structured import cli as structured_cli

    structured_cli.register(sub, review_db=_review_db)


def _register_eval(sub: Subcommands) -> None:
    from orgate.evaluation import cli as eval_cli

    eval_cli.register(sub)


def _register_probe(sub: Subcommands) -> None:
    from orgate.probe import cli as probe_cli

    probe_cli.register(sub)


def _register_ops(sub: Subcommands) -> None:
    from orgate import ops_cli

    ops_cli.register(sub)


def _register_completion(sub: Subcommands) -> None:
    completion = sub.add_parser("completion", help="print a shell completion script")
    completion.add_argument(
        "shell", choices=["bash", "zsh", "fish"], help="the shell to complete in"
    )
    completion.set_defaults(func=_cmd_completion)


def _cmd_completion(args: argparse.Namespace) -> int:
    """A completion script from the whole parser (every command's module is imported)."""
    from orgate.completion import script

    sys.stdout.write(script(build_parser(), args.shell))
    return 0


#: Each command → what adds it (and its siblings of the same module) to the parser, in help order.
_REGISTRARS = {
    "serve": _add_serve,
    "gate": _register_gate,
    "diff": _register_gate,
    "store": _register_store,
    "schema": _register_structured,
    "review": _register_structured,
    "eval": _register_eval,
    "models": _register_probe,
    "init": _register_ops,
    "config": _register_ops,
    "completion": _register_completion,
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``orgate`` parser: every command, or only ``command``'s module's commands (the same
    arguments and help), so that running one command imports none of the others' modules."""
    parser = argparse.ArgumentParser(prog="orgate", description="Open Responses gateway.")
    parser.add_argument("--version", action="version", version=f"orgate {__version__}")
    add_data_dir_option(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if command in _REGISTRARS:
        _REGISTRARS[command](sub)
    else:
        for register in dict.fromkeys(_REGISTRARS.values()):
            register(sub)
    return parser


def _workers_count(text: str) -> int:
    from orgate.server.workers import workers_count

    return workers_count(text)


def _review_db(args: argparse.Namespace) -> tuple[str, str | None]:
    """Where the review queue of the configuration in $ORGATE_CONFIG (or the default) is: its
    response store, or its review file when the store is disabled."""
    from orgate.config import ConfigError, load_settings
    from orgate.structured.settings import StructuredSettings

    try:
        settings = load_settings(None)
    except ConfigError:
        return "store", None
    if settings.store.enabled:
        return "store", settings.store.url
    return "file", settings.structured.review_path() or StructuredSettings().review_path()


def _store_url_from_config(args: argparse.Namespace) -> None:
    """``orgate store …`` without ``--url`` or ``$ORGATE_STORE_URL`` uses the store ``orgate
    serve`` would: ``[store] url`` of ``--config`` / ``$ORGATE_CONFIG`` (exit status 2 on a
    config error)."""
    from orgate.config import ConfigError, load_settings
    from orgate.store.cli import URL_ENV

    if args.url or os.environ.get(URL_ENV):
        return
    try:
        args.url = load_settings(args.config).store.url
    except ConfigError as exc:
        fail(str(exc), 2)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--version"]:  # answered before the parser's imports
        print(f"orgate {__version__}")
        return 0
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    args.argv = argv  # `serve --workers N` starts its workers with the same arguments
    if getattr(args, "data_dir", None):
        # through the environment: every reader of the data directory (and a worker process) agrees
        os.environ[datadir.ENV] = os.path.abspath(os.path.expanduser(args.data_dir))
    try:
        if getattr(args, "store_command", None):
            _store_url_from_config(args)
        handler = getattr(args, "handler", None) or args.func
        return int(handler(args) or 0)
    except CommandError as exc:
        terminal.error(str(exc))
        return exc.status


if __name__ == "__main__":
    sys.exit(main())
