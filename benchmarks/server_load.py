"""Load benchmark of ``phaseaware serve-reference`` on loopback.

    python benchmarks/server_load.py [--requests 500] [--concurrency 64] [--max-tokens 4]

Starts ``python -m phaseaware serve-reference --port 0`` (the shipped reference model),
then fires ``--requests`` chat completions from ``--concurrency`` threads, each request on
a FRESH TCP connection (the burst case: every request passes the listen backlog and
accept), and prints sent / ok / dropped (no HTTP answer: reset, refused, timed out),
p50 / p99 latency (ms) and requests/s; then throughput at concurrency 1 vs 16 (the
batching queue should make 16 several times faster). Prompts are short (~40 tokens).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

CONTENT = (
    "The access code for Priya is 317 . A quiet river waits near the old garden . "
    "The access code for Hugo is 204 . What is the access code for {name} ?"
)


@dataclass(frozen=True)
class LoadResult:
    """What one load run saw: counts, latencies of answered requests (seconds), wall time."""

    sent: int
    ok: int
    errors: int  # an HTTP answer other than 200
    dropped: int  # no HTTP answer at all
    latencies: tuple[float, ...]
    wall_s: float

    @property
    def requests_per_s(self) -> float:
        return self.ok / self.wall_s if self.wall_s > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def line(self) -> str:
        return (
            f"sent {self.sent}  ok {self.ok}  errors {self.errors}  dropped {self.dropped}  "
            f"p50 {self.percentile_ms(0.50):.0f} ms  p99 {self.percentile_ms(0.99):.0f} ms  "
            f"{self.requests_per_s:.1f} req/s"
        )


def chat_body(model: str, i: int, max_tokens: int) -> dict[str, object]:
    name = "Priya" if i % 2 == 0 else "Hugo"
    content = CONTENT.format(name=name)
    return {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }


def run_load(
    base_url: str,
    bodies: list[Mapping[str, object]],
    *,
    concurrency: int,
    timeout_s: float = 120.0,
    headers: Mapping[str, str] | None = None,
) -> LoadResult:
    """POST every body to ``{base_url}/chat/completions`` from ``concurrency`` threads,
    one fresh connection per request."""
    url = urlsplit(base_url)
    path = url.path.rstrip("/") + "/chat/completions"
    lock = threading.Lock()
    pending = list(enumerate(bodies))[::-1]
    latencies: list[float] = []
    counts = {"ok": 0, "errors": 0, "dropped": 0}

    def worker() -> None:
        while True:
            with lock:
                if not pending:
                    return
                _, body = pending.pop()
            data = json.dumps(body).encode()
            started = time.monotonic()
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout_s)
            try:
                conn.request(
                    "POST",
                    path,
                    body=data,
                    headers={"Content-Type": "application/json", **(headers or {})},
                )
                response = conn.getresponse()
                response.read()
                kind = "ok" if response.status == 200 else "errors"
            except (OSError, http.client.HTTPException):
                kind = "dropped"
            finally:
                conn.close()
            with lock:
                counts[kind] += 1
                if kind != "dropped":
                    latencies.append(time.monotonic() - started)

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return LoadResult(
        sent=len(bodies),
        ok=counts["ok"],
        errors=counts["errors"],
        dropped=counts["dropped"],
        latencies=tuple(latencies),
        wall_s=time.monotonic() - started,
    )


def _start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "phaseaware", "serve-reference", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if " at " not in line:
        proc.kill()
        raise SystemExit(f"serve-reference did not start: {line!r}")
    return proc, line.split(" at ")[1].split()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--compare-requests", type=int, default=64)
    args = parser.parse_args()

    proc, base_url = _start_server()
    try:
        model = "phaseaware-reference"
        warm = [chat_body(model, i, args.max_tokens) for i in range(4)]
        run_load(base_url, warm, concurrency=2)
        bodies = [chat_body(model, i, args.max_tokens) for i in range(args.requests)]
        result = run_load(base_url, bodies, concurrency=args.concurrency)
        print(f"serve-reference, {args.requests} requests at concurrency {args.concurrency}:")
        print("  " + result.line())
        compare = [chat_body(model, i, args.max_tokens) for i in range(args.compare_requests)]
        rates = {}
        for concurrency in (1, 16):
            run = run_load(base_url, compare, concurrency=concurrency)
            rates[concurrency] = run.requests_per_s
            print(f"  concurrency {concurrency:>2}: " + run.line())
        print(f"  throughput 16 vs 1: x{rates[16] / rates[1]:.1f}")
        latency = statistics.median(result.latencies) if result.latencies else float("nan")
        print(f"  median latency at concurrency {args.concurrency}: {1000 * latency:.0f} ms")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
