"""Per-provider translation cost: orgate against the direct upstream, for each provider.

For each provider protocol orgate speaks — ``openai-chat`` (Chat Completions),
``openai-responses`` (OpenAI Responses) and ``anthropic`` (Messages) — nginx
serves a canned upstream answer (``bench/fixtures/`` and
``bench/fixtures/providers/``), path-routed because nginx cannot read a
request body: ``/<provider>-plain/...`` answers the non-stream JSON body,
``/<provider>-sse/...`` the SSE stream. One ``orgate serve`` (store off,
API-key auth) gets one model per provider, each pointed at the SSE path (the
providers always stream from the upstream, for streaming and non-streaming
clients alike).

For each provider and client mode (non-stream, stream) wrk measures, back to
back:

``direct``  client → nginx with that provider's own request (its physical limit);
``orgate``  client → orgate ``/v1/responses`` → that provider's upstream.

It prints requests/s, server CPU µs per request, non-2xx counts, the ratio
orgate/direct (req/s) and a Markdown table for ``docs/performance.md``. Every
response kind is validated once before measuring (HTTP 200; a stream ends with
``data: [DONE]``; orgate's output text is the canned one). A run with a non-2xx
response or a socket error is INVALID and makes the script exit 1.

Run: ``.venv/bin/python bench/provider_bench.py [--duration 5] [--conns 16] [--json out.json]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_gateway_bench import (  # noqa: E402
    API_KEY,
    FIXTURES,
    REPO_DIR,
    WORK_DIR,
    BenchError,
    Leg,
    Proc,
    ProcessManager,
    Result,
    Target,
    WrkOptions,
    fmt,
    free_port,
    measure,
    nginx_location,
    one_request,
    process_tree,
    serve_static,
    wait_port,
)

PROVIDER_FIXTURES = FIXTURES / "providers"
PWORK = WORK_DIR / "providers"
PROVIDERS = ("openai-chat", "openai-responses", "anthropic")
MODES = ("nonstream", "stream")
# The text every canned upstream answer carries.
CANNED_TEXT = (
    "Hello! How can I help you today? I'm happy to answer questions, write code or just chat."
)

# provider -> (upstream path after the /<provider>-plain|sse prefix, JSON body, SSE body,
#              direct request, direct stream request, upstream model)
UPSTREAM: dict[str, dict[str, Any]] = {
    "openai-chat": {
        "path": "/v1/chat/completions",
        "base_suffix": "/v1",
        "json": FIXTURES / "chat_completion.json",
        "sse": FIXTURES / "chat_completion.sse",
        "request": FIXTURES / "chat_request.json",
        "request_stream": FIXTURES / "chat_request_stream.json",
        "model": "gpt-4o-mini",
    },
    "openai-responses": {
        "path": "/v1/responses",
        "base_suffix": "/v1",
        "json": PROVIDER_FIXTURES / "responses_response.json",
        "sse": PROVIDER_FIXTURES / "responses_response.sse",
        "request": PROVIDER_FIXTURES / "responses_upstream_request.json",
        "request_stream": PROVIDER_FIXTURES / "responses_upstream_request_stream.json",
        "model": "gpt-4o-mini",
    },
    "anthropic": {
        "path": "/v1/messages",
        "base_suffix": "",  # messages_url() appends /v1/messages
        "json": PROVIDER_FIXTURES / "anthropic_message.json",
        "sse": PROVIDER_FIXTURES / "anthropic_messages.sse",
        "request": PROVIDER_FIXTURES / "anthropic_request.json",
        "request_stream": PROVIDER_FIXTURES / "anthropic_request_stream.json",
        "model": "claude-haiku-4-5",
    },
}


def model_name(provider: str) -> str:
    return f"bench-{provider}"


def start_nginx(pm: ProcessManager) -> tuple[Proc, int]:
    locations = "".join(
        nginx_location(f"/{provider}-plain{up['path']}", "application/json", up["json"])
        + nginx_location(f"/{provider}-sse{up['path']}", "text/event-stream", up["sse"])
        for provider, up in UPSTREAM.items()
    )
    return serve_static(pm, "providers-nginx", PWORK / "nginx", locations)


def orgate_config(port: int, nginx_port: int) -> str:
    lines = [
        "# Written by bench/provider_bench.py; rewritten on every run.",
        "[server]",
        'host = "127.0.0.1"',
        f"port = {port}",
        "",
        "[auth]",
        f'api_keys = ["{API_KEY}"]',
        "",
        "[store]",
        "enabled = false",
    ]
    for provider, up in UPSTREAM.items():
        lines += [
            "",
            "[[models]]",
            f'name = "{model_name(provider)}"',
            f'provider = "{provider}"',
            f'base_url = "http://127.0.0.1:{nginx_port}/{provider}-sse{up["base_suffix"]}"',
            'api_key = "x"',
            f'upstream_model = "{up["model"]}"',
        ]
    return "\n".join(lines) + "\n"


def start_orgate(pm: ProcessManager, nginx_port: int, orgate_bin: Path) -> tuple[Proc, int]:
    if not orgate_bin.exists():
        raise BenchError(f"{orgate_bin} does not exist (pip install -e . in the repo venv)")
    port = free_port()
    config = PWORK / "orgate.toml"
    config.write_text(orgate_config(port, nginx_port))
    argv = [str(orgate_bin), "serve", "--config", str(config), "--port", str(port)]
    proc = pm.spawn("providers-orgate", argv, cwd=REPO_DIR)
    wait_port(port, proc, 60)
    return proc, port


def direct_leg(provider: str, nginx_proc: Proc, nginx_port: int) -> Leg:
    up = UPSTREAM[provider]
    base = f"http://127.0.0.1:{nginx_port}/{provider}"
    return Leg(
        "direct",
        {
            "nonstream": Target(f"{base}-plain{up['path']}", up["request"]),
            "stream": Target(f"{base}-sse{up['path']}", up["request_stream"]),
        },
        nginx_proc,
    )


def orgate_leg(provider: str, orgate_proc: Proc, orgate_port: int) -> Leg:
    url = f"http://127.0.0.1:{orgate_port}/v1/responses"
    targets = {}
    for mode in MODES:
        body: dict[str, Any] = {"model": model_name(provider), "input": "Say hello"}
        if mode == "stream":
            body["stream"] = True
        path = PWORK / f"orgate_{provider}_{mode}.json"
        path.write_text(json.dumps(body))
        targets[mode] = Target(url, path, f"Bearer {API_KEY}")
    return Leg("orgate", targets, orgate_proc)


def sse_data(body: bytes) -> list[str]:
    return [
        line.removeprefix("data:").strip()
        for line in body.decode().splitlines()
        if line.startswith("data:")
    ]


def validate(provider: str, leg: Leg, mode: str) -> str:
    """One request: HTTP 200 of the right kind; orgate's answer carries the canned text."""
    target = leg.targets[mode]
    status, ctype, body = one_request(target)
    where = f"{provider}/{leg.name}/{mode}"
    if status != 200:
        raise BenchError(f"{where}: HTTP {status} {ctype}: {body[:400]!r}")
    if mode == "stream":
        if not ctype.startswith("text/event-stream"):
            raise BenchError(f"{where}: Content-Type {ctype!r}, want text/event-stream")
        if leg.name == "direct":
            return f"{len(body)} B SSE"
        if not body.rstrip().endswith(b"data: [DONE]"):
            raise BenchError(f"{where}: stream does not end with data: [DONE]: {body[-200:]!r}")
        text = ""
        for data in sse_data(body):
            if data != "[DONE]":
                event = json.loads(data)
                if event.get("type") == "response.output_text.delta":
                    text += event["delta"]
    else:
        if not ctype.startswith("application/json"):
            raise BenchError(f"{where}: Content-Type {ctype!r}, want application/json")
        doc = json.loads(body)
        if leg.name == "direct":
            return f"{len(body)} B JSON"
        text = "".join(
            part.get("text", "")
            for item in doc.get("output", [])
            for part in item.get("content", []) or []
        )
    if text != CANNED_TEXT:
        raise BenchError(f"{where}: output text {text!r}, want {CANNED_TEXT!r}")
    return f"{len(body)} B, text ok"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def report(results: list[Result], conns: int) -> tuple[str, list[dict[str, Any]]]:
    """The plain table, the ratio rows, and (returned) a Markdown table."""
    rows: list[dict[str, Any]] = []
    for provider in PROVIDERS:
        for mode in MODES:
            d = next((r for r in results if r.leg == f"{provider}/direct" and r.mode == mode), None)
            o = next((r for r in results if r.leg == f"{provider}/orgate" and r.mode == mode), None)
            if d is None and o is None:
                continue
            rows.append(
                {
                    "provider": provider,
                    "mode": mode,
                    "conns": conns,
                    "direct_rps": d.rps if d else None,
                    "orgate_rps": o.rps if o else None,
                    "orgate_over_direct": ratio(o.rps, d.rps)
                    if o and d and d.valid and o.valid
                    else None,
                    "direct_cpu_us_per_req": d.server_cpu_us_per_req if d else None,
                    "orgate_cpu_us_per_req": o.server_cpu_us_per_req if o else None,
                    "direct_non_2xx": d.non_2xx if d else None,
                    "orgate_non_2xx": o.non_2xx if o else None,
                    "orgate_p50_ms": o.p50_ms if o else None,
                    "valid": bool(d and o and d.valid and o.valid),
                    "foreign_cpu_pct": max(
                        (r.foreign_cpu_pct or 0.0 for r in (d, o) if r), default=None
                    ),
                }
            )
    header = (
        f"{'provider':<17} {'mode':<9} {'direct req/s':>12} {'orgate req/s':>12} "
        f"{'orgate/direct':>13} {'direct cpu us/req':>17} {'orgate cpu us/req':>17} "
        f"{'non2xx d/o':>10} {'foreign%':>8}"
    )
    lines = [header, "-" * len(header)]
    md = [
        "| provider | client mode | direct req/s | orgate req/s | orgate/direct | "
        "orgate CPU µs/req | direct (nginx) CPU µs/req |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        pct = row["orgate_over_direct"]
        lines.append(
            f"{row['provider']:<17} {row['mode']:<9} {fmt(row['direct_rps']):>12} "
            f"{fmt(row['orgate_rps']):>12} {fmt(pct and 100 * pct):>12}% "
            f"{fmt(row['direct_cpu_us_per_req']):>17} {fmt(row['orgate_cpu_us_per_req']):>17} "
            f"{row['direct_non_2xx']!s:>4}/{row['orgate_non_2xx']!s:<5} "
            f"{fmt(row['foreign_cpu_pct'], '.0f'):>8}"
            f"{'' if row['valid'] else '  INVALID'}"
        )
        md.append(
            f"| `{row['provider']}` | {row['mode']} | {fmt(row['direct_rps'], '.0f')} | "
            f"{fmt(row['orgate_rps'], '.0f')} | {fmt(pct and 100 * pct)} % | "
            f"{fmt(row['orgate_cpu_us_per_req'], '.0f')} | "
            f"{fmt(row['direct_cpu_us_per_req'], '.0f')} |"
        )
    text = "\n".join(lines) + "\n\nMarkdown (docs/performance.md):\n\n" + "\n".join(md) + "\n"
    return text, rows


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=5.0, help="seconds per measured run")
    p.add_argument("--conns", type=int, default=16, help="wrk connections")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up before each run")
    p.add_argument("--threads", type=int, default=2, help="wrk threads (capped at conns)")
    p.add_argument("--timeout", type=int, default=20, help="wrk per-request timeout, s")
    p.add_argument("--orgate-bin", type=Path, default=REPO_DIR / ".venv" / "bin" / "orgate")
    p.add_argument("--json", type=Path, help="write all results to this JSON file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not shutil.which("wrk"):
        raise SystemExit("wrk not found: apt-get install -y wrk")
    (PWORK / "logs").mkdir(parents=True, exist_ok=True)
    pm = ProcessManager(PWORK / "logs")
    running_wrk: list[subprocess.Popen[str]] = []

    def on_term(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_term)
    opts = WrkOptions(args.threads, args.timeout)
    results: list[Result] = []
    started = time.time()
    failed = ""
    print(
        f"orgate provider bench: providers={list(PROVIDERS)} conns={args.conns} "
        f"duration={args.duration}s warmup={args.warmup}s nproc={os.cpu_count()} "
        f"loadavg={os.getloadavg()[0]:.2f}",
        flush=True,
    )
    try:
        nginx_proc, nginx_port = start_nginx(pm)
        orgate_proc, orgate_port = start_orgate(pm, nginx_port, args.orgate_bin)
        print(
            f"nginx :{nginx_port} (pid {nginx_proc.pid}), orgate :{orgate_port} "
            f"(pid {orgate_proc.pid})",
            flush=True,
        )
        legs = {
            p: [direct_leg(p, nginx_proc, nginx_port), orgate_leg(p, orgate_proc, orgate_port)]
            for p in PROVIDERS
        }
        hints: dict[tuple[str, str, str], float] = {}
        for provider, pair in legs.items():
            for leg in pair:
                for mode in MODES:
                    t = time.monotonic()
                    note = validate(provider, leg, mode)
                    hints[(provider, leg.name, mode)] = 1 / max(time.monotonic() - t, 1e-6)
                    print(f"[{provider}/{leg.name}] {mode} ok: {note}", flush=True)
        nginx_pids = process_tree(nginx_proc.pid)
        for mode in MODES:
            for provider, pair in legs.items():
                for leg in pair:
                    r = measure(
                        leg,
                        mode,
                        args.conns,
                        args.duration,
                        args.warmup,
                        hints[(provider, leg.name, mode)],
                        nginx_pids,
                        opts,
                        running_wrk,
                        max(60.0, args.duration),
                    )
                    r.leg = f"{provider}/{leg.name}"
                    results.append(r)
                    print(
                        f"[{r.leg}] {mode:<9} c={args.conns} {r.rps:>9.1f} req/s  "
                        f"cpu {fmt(r.server_cpu_us_per_req)} us/req  p50 {r.p50_ms:.2f} ms  "
                        f"non2xx {r.non_2xx}  sockerr {sum(r.socket_errors.values())}  "
                        f"foreign cpu {fmt(r.foreign_cpu_pct, '.0f')}%"
                        f"{'' if r.valid else '  INVALID'}",
                        flush=True,
                    )
    except KeyboardInterrupt:
        failed = "interrupted"
        print("\ninterrupted: stopping everything", file=sys.stderr, flush=True)
    except BenchError as exc:
        failed = str(exc)
        print(f"error: {exc}", file=sys.stderr, flush=True)
    finally:
        for popen in list(running_wrk):
            with contextlib.suppress(OSError):
                popen.kill()
        pm.stop_all()

    text, rows = report(results, args.conns)
    print("\n" + text)
    if args.json:
        doc = {
            "meta": {
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                "seconds": round(time.time() - started, 1),
                "host": platform.node(),
                "nproc": os.cpu_count(),
                "python": platform.python_version(),
                "args": {k: str(v) for k, v in vars(args).items()},
                "failed": failed,
            },
            "results": [asdict(r) | {"valid": r.valid} for r in results],
            "ratios": rows,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"results written to {args.json}")
    invalid = [r for r in results if not r.valid]
    if invalid:
        print(f"{len(invalid)} measurement(s) INVALID (non-2xx or socket errors)", file=sys.stderr)
    return 1 if failed or invalid else 0


if __name__ == "__main__":
    sys.exit(main())
