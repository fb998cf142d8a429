"""``serve-reference`` under an abusive client, on loopback only.

    python benchmarks/server_abuse.py [--seconds 8] [--clients 4]

1. ``ReferenceEngine.encode_chat`` time against message count (the chat is encoded in one
   pass over the rendered text: time grows linearly).
2. Starts ``python -m phaseaware serve-reference --port 0`` (127.0.0.1), then measures the
   latency of ``--clients`` well-behaved clients (short chats, one at a time each) for
   ``--seconds``: alone, then while one abusive client sends, back to back, 250,000 empty
   messages (under the 8 MiB body cap), 1,000,000-character prompts, and long generations
   it abandons after 0.2 s. Prints p50 / p95 latency of the well-behaved clients and what
   the abusive client got (status counts). Bounded: every phase ends after ``--seconds``.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

MODEL = "phaseaware-reference"
GOOD = {
    "model": MODEL,
    "max_tokens": 4,
    "messages": [{"role": "user", "content": "The access code for Ana is 12 . Ana ?"}],
}


def encode_scaling() -> list[tuple[int, float]]:
    from phaseaware.reference.engine import ReferenceEngine
    from phaseaware.reference.load import load_reference

    engine = ReferenceEngine(*load_reference("cpu"))
    rows = []
    for n in (1_000, 5_000, 20_000):
        messages = [{"role": ("user", "assistant")[i % 2], "content": "a b"} for i in range(n)]
        started = time.perf_counter()
        engine.encode_chat(messages)
        rows.append((n, time.perf_counter() - started))
    return rows


def _post(port: int, body: bytes, timeout: float = 60) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(
            "POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _good_clients(port: int, clients: int, seconds: float) -> list[float]:
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    body = json.dumps(GOOD).encode()

    def one() -> None:
        while time.monotonic() < stop:
            started = time.perf_counter()
            status = _post(port, body)
            took = time.perf_counter() - started
            if status == 200:
                with lock:
                    latencies.append(took)

    threads = [threading.Thread(target=one) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def _abuser(port: int, seconds: float, seen: collections.Counter[str], kinds: list[str]) -> None:
    many = {"model": MODEL, "messages": [{"role": "user", "content": ""}] * 250_000}
    huge = {"model": MODEL, "messages": [{"role": "user", "content": "a " * 500_000}]}
    long = {**GOOD, "max_tokens": 480}
    bodies = [json.dumps(b, separators=(",", ":")).encode() for b in (many, huge)]
    stop = time.monotonic() + seconds
    i = 0
    while time.monotonic() < stop:
        kind = kinds[i % len(kinds)]
        i += 1
        if kind == "abandon":  # a long generation, abandoned
            data = json.dumps(long).encode()
            head = (
                f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                f"application/json\r\nContent-Length: {len(data)}\r\n\r\n"
            ).encode()
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(head + data)
                time.sleep(0.2)
            seen["abandoned"] += 1
            continue
        seen[f"{kind} {_post(port, bodies[kind == 'huge'])}"] += 1


def _ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--abuse", default="many,huge,abandon", help="comma list of many, huge, abandon"
    )
    args = parser.parse_args()

    print("encode_chat time by message count (one pass: linear)")
    print(f"{'messages':>9} {'seconds':>8}")
    for n, took in encode_scaling():
        print(f"{n:>9} {took:>8.2f}")

    proc = subprocess.Popen(
        [sys.executable, "-m", "phaseaware", "serve-reference", "--host", "127.0.0.1",
         "--port", "0"],
        stdout=subprocess.PIPE, env={**os.environ, "PHASEAWARE_SERVER_API_KEY": ""},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        port = int(line.split("/v1")[0].rsplit(":", 1)[1])
        _good_clients(port, args.clients, 2.0)  # warm-up (first forward passes), not measured
        alone = _good_clients(port, args.clients, args.seconds)
        seen: collections.Counter[str] = collections.Counter()
        abuser = threading.Thread(
            target=_abuser, args=(port, args.seconds, seen, args.abuse.split(","))
        )
        abuser.start()
        abused = _good_clients(port, args.clients, args.seconds)
        abuser.join()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print()
    print(f"well-behaved clients: {args.clients}, {args.seconds:g} s per phase")
    print(f"{'phase':<14} {'requests':>8} {'p50 ms':>7} {'p95 ms':>7} {'mean ms':>8}")
    for name, lat in (("alone", alone), ("with abuser", abused)):
        mean = f"{1000 * statistics.fmean(lat):.0f}" if lat else "-"
        print(f"{name:<14} {len(lat):>8} {_ms(lat, 0.5):>7} {_ms(lat, 0.95):>7} {mean:>8}")
    print(f"abusive client: {dict(sorted(seen.items()))} (400: refused by the bounds)")


if __name__ == "__main__":
    main()
