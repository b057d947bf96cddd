"""Smoke-test an orgate installed exactly as the README says, from outside the process.

Run by ``scripts/install-smoke.sh`` with the test virtualenv's Python (which has the ``openai``
SDK and ``websockets``) against the ``orgate`` command of a fresh virtualenv that has no test
extras: a feature whose library only the test extras brought in fails here.

Checks: the banner; the README's curl and SDK examples, extracted from README.md so that they
cannot drift; a WebSocket ``response.create``; ``/openapi.json``; every CLI command's ``--help``;
and that a feature needing an optional extra, asked for without it, stops the start with one
line naming the ``pip install 'orgate[...]'`` to run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README_PORT = "127.0.0.1:8080"
KEY = "sk-local-test"  # the README's own key
START_TIMEOUT = float(os.environ.get("ORGATE_TEST_START_TIMEOUT", "120"))
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def readme_blocks(lang: str) -> list[str]:
    """The README's fenced code blocks of one language, in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


@contextmanager
def server(
    orgate: Path, port: int, env: dict[str, str], workdir: Path
) -> Iterator[subprocess.Popen[str]]:
    log = (workdir / f"serve-{port}.log").open("w+")
    proc = subprocess.Popen(
        [str(orgate), "serve", "--port", str(port)],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5):
                    break
            except OSError:
                time.sleep(0.2)
        if proc.poll() is not None:
            log.seek(0)
            raise SystemExit(f"orgate serve exited with {proc.returncode}:\n{log.read()}")
        proc.banner_log = log  # type: ignore[attr-defined]
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def check_banner(proc: subprocess.Popen[str], port: int) -> None:
    log = proc.banner_log  # type: ignore[attr-defined]
    log.seek(0)
    banner = log.read()
    check(f"http://127.0.0.1:{port}/v1" in banner, "banner names the URL")
    check("orgate/echo" in banner, "banner names the built-in model")
    check(
        "Traceback" not in banner and "No supported WebSocket library" not in banner,
        "no traceback or missing-library warning in the log",
    )


def check_curl_examples(port: int, env: dict[str, str]) -> None:
    commands = [block for block in readme_blocks("sh") if "curl " in block]
    check(len(commands) >= 1, "README has curl examples")
    for block in commands:
        script = block.replace(README_PORT, f"127.0.0.1:{port}")
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        out = done.stdout
        check(
            done.returncode == 0 and '"status":"completed"' in out.replace(" ", ""),
            "README curl JSON example answers a completed response",
        )
        check(
            "data: [DONE]" in out and "response.output_text.delta" in out,
            "README curl streaming example streams deltas and [DONE]",
        )


def check_sdk_examples(port: int, env: dict[str, str]) -> None:
    blocks = [block for block in readme_blocks("python") if "from openai import OpenAI" in block]
    check(len(blocks) >= 1, "README has an openai SDK example")
    for block in blocks:
        script = (
            block.replace(README_PORT, f"127.0.0.1:{port}")
            + "\nassert final.status == 'completed', final\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
        )
        check(
            done.returncode == 0 and "Hello!" in done.stdout,
            f"README SDK example runs (exit {done.returncode}) {done.stderr[-300:]}",
        )


def check_websocket(port: int) -> None:
    import websockets

    async def one_turn() -> str:
        async with websockets.connect(
            f"ws://127.0.0.1:{port}/v1/responses",
            additional_headers={"Authorization": f"Bearer {KEY}"},
        ) as ws:
            await ws.send(
                json.dumps(
                    {
                        "type": "response.create",
                        "model": "orgate/echo",
                        "input": "over a socket",
                        "store": False,
                    }
                )
            )
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), 120))
                if event["type"] in (
                    "response.completed",
                    "response.failed",
                    "response.incomplete",
                    "error",
                ):
                    return str(event["type"])

    try:
        kind = asyncio.run(one_turn())
    except Exception as exc:  # any failure is the finding
        kind = f"{type(exc).__name__}: {exc}"
    check(kind == "response.completed", f"WebSocket response.create completes ({kind})")


def check_openapi(port: int) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/openapi.json", timeout=60) as reply:
        doc = json.loads(reply.read())
    check("/responses" in doc.get("paths", {}), "/openapi.json documents POST /v1/responses")


def subcommands(orgate: Path, *path: str) -> list[str]:
    done = subprocess.run(
        [str(orgate), *path, "--help"], capture_output=True, text=True, timeout=120
    )
    check(
        done.returncode == 0 and "usage:" in done.stdout, f"`orgate {' '.join((*path, '--help'))}`"
    )
    # argparse lists subcommands under "positional arguments:", indented by four spaces.
    lines = done.stdout.splitlines()
    if "positional arguments:" not in lines:
        return []
    names: list[str] = []
    for line in lines[lines.index("positional arguments:") + 1 :]:
        if not line.strip():
            break
        found = re.match(r"^    ([a-z][\w-]*)(\s{2,}|$)", line)
        if found:
            names.append(found.group(1))
    return names


def check_cli_help(orgate: Path) -> None:
    commands = subcommands(orgate)
    check(len(commands) >= 5, f"`orgate --help` lists its commands ({', '.join(commands)})")
    pending: list[tuple[str, ...]] = [(name,) for name in commands]
    while pending:
        path = pending.pop()
        pending += [(*path, name) for name in subcommands(orgate, *path)]


# a limit, so that a limiter is built
LIMITED_KEY = '[auth]\napi_keys = [{ name = "smoke", key = "env:ORGATE_API_KEY", rpm = 600 }]\n'
# feature → (environment asking for it, config file text or "", the extra its error must name)
EXTRAS = {
    "postgresql:// store": (
        {"ORGATE_STORE__URL": "postgresql://orgate@127.0.0.1:1/orgate"},
        "",
        "orgate[postgres]",
    ),
    "Redis rate limits": (
        {"ORGATE_RATELIMIT__REDIS_URL": "redis://127.0.0.1:1/0"},
        LIMITED_KEY,
        "orgate[redis]",
    ),
    "OpenTelemetry tracing": ({"ORGATE_TRACING__ENABLED": "true"}, "", "orgate[otel]"),
}


def check_extras(orgate: Path, env: dict[str, str], workdir: Path) -> None:
    for feature, (extra_env, config_text, extra) in EXTRAS.items():
        args = [str(orgate), "serve", "--port", "0"]
        if config_text:
            config = workdir / "extra.toml"
            config.write_text(config_text)
            args += ["--config", str(config)]
        done = subprocess.run(
            args, cwd=workdir, env={**env, **extra_env}, capture_output=True, text=True, timeout=120
        )
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        check(
            done.returncode != 0 and len(lines) == 1 and f"pip install '{extra}'" in lines[0],
            f"{feature} without its extra stops the start in one line naming {extra} "
            f"(exit {done.returncode}: {done.stderr[-400:]!r})",
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("orgate", type=Path, help="the orgate command of the fresh install")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="orgate-install-smoke-") as tmp:
        workdir = Path(tmp)
        env = {**os.environ, "ORGATE_API_KEY": KEY, "HOME": tmp, "XDG_DATA_HOME": tmp}
        env = {k: v for k, v in env.items() if not k.startswith("ORGATE_") or k == "ORGATE_API_KEY"}
        port = free_port()
        print(f"orgate serve on port {port} from {args.orgate}", flush=True)
        with server(args.orgate, port, env, workdir) as proc:
            check_banner(proc, port)
            check_curl_examples(port, env)
            check_sdk_examples(port, env)
            check_websocket(port)
            check_openapi(port)
        check_cli_help(args.orgate)
        check_extras(args.orgate, env, workdir)
    if failures:
        print(f"install smoke: {len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("install smoke: all checks passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
