"""The operator's commands around the server: ``orgate init`` (a commented starting config)
and ``orgate config check [FILE]`` (validate and print the resolved configuration, secrets
masked). ``orgate completion`` needs the whole parser: ``orgate.cli`` owns it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from orgate import terminal
from orgate.terminal import command, fail

#: ``orgate init --provider``: the ``[[models]]`` table each one adds.
PROVIDER_TEMPLATES: dict[str, str] = {
    "openai": """\
[[models]]
name = "gpt-4o-mini"                # what clients send as `model`
provider = "openai-chat"
base_url = "https://api.openai.com/v1"
api_key = "env:OPENAI_API_KEY"      # the key is read from this variable, never written here
""",
    "openai-responses": """\
[[models]]
name = "gpt-4.1-mini"
provider = "openai-responses"       # OpenAI's own /v1/responses
base_url = "https://api.openai.com/v1"
api_key = "env:OPENAI_API_KEY"
""",
    "anthropic": """\
[[models]]
name = "claude-sonnet"
provider = "anthropic"
base_url = "https://api.anthropic.com"
api_key = "env:ANTHROPIC_API_KEY"
upstream_model = "claude-sonnet-4-5"
""",
    "local": """\
[[models]]
name = "local"                      # an OpenAI-compatible server: vLLM, Ollama, llama.cpp...
provider = "openai-chat"
base_url = "http://127.0.0.1:8000/v1"
upstream_model = "Qwen/Qwen2.5-7B-Instruct"
""",
}

HEADER = """\
# orgate configuration (written by `orgate init`). Every key and its default:
# docs/configuration.md. Check it with `orgate config check {name}`, run it with
# `orgate serve --config {name}`. Secrets never live here: write "env:NAME" and set NAME.

[server]
host = "127.0.0.1"                  # "0.0.0.0" to listen on every interface
port = 8080
log_format = "text"                 # "json": one JSON object per line, for a log pipeline
# public_url = "https://gateway.example.com"

[auth]
api_keys = ["env:ORGATE_API_KEY"]   # clients send one of these as a Bearer token

[store]
# url = "env:ORGATE_STORE_URL"      # postgresql://... for several processes; default: SQLite
#                                   # in the data directory (orgate --data-dir, $ORGATE_DATA_DIR)
ttl_days = 30

[endpoints]
chat_completions = {{ enabled = false }}  # true: the legacy /v1/chat/completions adapter

"""


@command
def cmd_init(args: argparse.Namespace) -> int:
    providers = args.provider or ["openai"]
    name = "orgate.toml" if args.output == "-" else os.path.basename(args.output)
    text = HEADER.format(name=name) + "\n".join(PROVIDER_TEMPLATES[p] for p in providers)
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    path = Path(args.output)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if args.force else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        fail(f"{path} exists: choose another --output, or --force to replace it")
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.chmod(path, 0o600)  # a replaced file keeps its old mode otherwise
    print(f"wrote {path} ({', '.join(providers)}); next: orgate config check {path}")
    return 0


@command
def cmd_config_check(args: argparse.Namespace) -> int:
    from orgate.config import ConfigError, deployments, load_settings, resolve_api_keys, route_table
    from orgate.config.secrets import literal_secrets, masked

    try:
        settings = load_settings(args.file)
        # what `serve` resolves before it listens: env: references, deployments, routes
        resolve_api_keys(settings)
        deployments(settings)
        route_table(settings)
    except ConfigError as exc:
        fail(str(exc), 2)
    warnings = [*settings.warnings, *literal_secrets(settings)]
    for warning in warnings:
        terminal.warning(warning)
    if not args.quiet:
        resolved = masked(settings.model_dump(mode="json", exclude={"source"}))
        print(json.dumps(resolved, indent=2, ensure_ascii=False))
    where = settings.source or "the embedded default configuration"
    note = f" ({len(warnings)} warning(s))" if warnings else ""
    print(f"orgate: {where} is valid{note}", file=sys.stderr)
    return 0


def register(subparsers: Any) -> None:
    """Add ``init`` and ``config`` to the main parser's sub-commands."""
    init = subparsers.add_parser("init", help="write a commented starting configuration")
    init.add_argument(
        "--provider",
        action="append",
        choices=sorted(PROVIDER_TEMPLATES),
        help="a model table to include (repeatable; default openai)",
    )
    init.add_argument(
        "-o",
        "--output",
        default="orgate.toml",
        metavar="FILE",
        help="file to write, or - for stdout (default orgate.toml)",
    )
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.set_defaults(func=cmd_init)

    config = subparsers.add_parser(
        "config", help="check a configuration without starting the server"
    )
    config_sub = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    check = config_sub.add_parser(
        "check", help="validate and print the resolved configuration (secrets masked)"
    )
    check.add_argument(
        "file",
        nargs="?",
        default=None,
        help="TOML config file (default: $ORGATE_CONFIG, else the embedded default)",
    )
    check.add_argument(
        "-q", "--quiet", action="store_true", help="only validate: print nothing but problems"
    )
    check.set_defaults(func=cmd_config_check)
