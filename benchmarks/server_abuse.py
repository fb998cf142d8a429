"""``serve-reference`` under an abusive client, on loopback only.

    python benchmarks/server_abuse.py [--seconds 8] [--clients 4] [--abuse max,escaped,...]

1. ``ReferenceEngine.encode_chat`` time against message count (the chat is encoded in one
   pass over the rendered text: time grows linearly).
2. Starts ``python -m phaseaware serve-reference --port 0`` (127.0.0.1), then measures the
   latency of ``--clients`` well-behaved clients (short chats, one at a time each, a fresh
   connection per request) for ``--seconds``: alone, then once per ``--abuse`` scenario
   while ONE abusive client sends its requests back to back. Scenarios (``a+b`` alternates):

   * ``max``: bodies of ``--body-bytes`` (default just under 8 MiB) within every other
     bound: one message of 262,000 characters (131,000 words) and tool schemas (ignored by
     this server) filling the rest, 8 KiB of ASCII each;
   * ``escaped``: the same size, every character ``\\u``-escaped non-ASCII (what
     ``json.dumps`` sends by default): the most work per byte for the body scan;
   * ``tools``: about 7 MB of tool schemas beside a short chat;
   * ``wide``: the largest prompt the model can take (``max_position_embeddings`` words);
   * ``many`` (250,000 empty messages), ``huge`` (a 1,000,000-character message),
     ``abandon`` (a long generation dropped after 0.2 s);
   * ``medium`` (1 MiB of tool schemas), ``deep`` (15,000 arrays 30 deep: within the
     depth and value bounds), ``tiny`` (1,024 one-word messages), ``stream`` (``max`` with
     ``stream: true``), ``toollist`` (3,000 small tool schemas), ``long`` (a 480-token
     generation, waited for: a prompt the model does not end early).

   ``kind*N``: N abusive clients at once (e.g. ``max*8``, ``medium*32``).

   Each scenario runs the abuser alone first (``--seconds / 2``: its requests per second,
   the server's CPU time per request and CPU share, 100% being one core: what it can take
   from others, which depends little on the machine's other load), then beside the
   well-behaved clients. One table: per phase, the well-behaved clients' requests,
   p50 / p95 / p99 / mean latency (ms), the abuser-alone figures, and the abusive client's
   answers (status: count). Every phase ends after
   ``--seconds``.
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
KINDS = (
    "max",
    "escaped",
    "tools",
    "wide",
    "many",
    "huge",
    "abandon",
    "medium",
    "deep",
    "tiny",
    "stream",
    "toollist",
    "long",
)
ROUND5_BODY_BYTES = 8 * 1024 * 1024 - 4096  # the 8 MiB bodies of the round-5 finding
CONTENT_CHARS = 262_000  # just under the 262,144-character prompt bound


def encode_scaling() -> list[tuple[int, float]]:
    from phaseaware.reference.engine import ReferenceEngine
    from phaseaware.reference.load import load_reference

    engine = ReferenceEngine(*load_reference("cpu"))
    engine.max_context_tokens = 10**9  # time the whole pass (the server stops at 512 tokens)
    rows = []
    for n in (1_000, 5_000, 20_000):
        messages = [{"role": ("user", "assistant")[i % 2], "content": "a b"} for i in range(n)]
        started = time.perf_counter()
        engine.encode_chat(messages)
        rows.append((n, time.perf_counter() - started))
    return rows


def _padded_chat(content: str, size: int, *, ascii_only: bool) -> bytes:
    """A chat of ``content`` plus tool schemas (8 KiB descriptions) up to ``size`` bytes."""
    word = "éàü " if ascii_only else "word "
    body = {"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": content}]}
    plain = json.dumps(body, separators=(",", ":"), ensure_ascii=ascii_only).encode()
    tools = []
    room = size - len(plain) - 64
    while room > 0:
        description = (word * 2000)[: min(8192, room) // (6 if ascii_only else 1)]
        tool = {"type": "function", "function": {"name": f"f{len(tools)}",
                "description": description, "parameters": {"type": "object"}}}  # fmt: skip
        data = json.dumps(tool, separators=(",", ":"), ensure_ascii=ascii_only)
        room -= len(data.encode()) + 1
        if room < 0:
            break
        tools.append(tool)
    return json.dumps(
        {**body, "tools": tools}, separators=(",", ":"), ensure_ascii=ascii_only
    ).encode()


def abuse_bodies(body_bytes: int, context_tokens: int) -> dict[str, bytes]:
    """The request body of each kind (``abandon`` is sent by hand, not from here)."""
    words = "a " * (CONTENT_CHARS // 2)
    accents = "é " * (CONTENT_CHARS // 2)
    many = {"model": MODEL, "messages": [{"role": "user", "content": ""}] * 250_000}
    huge = {"model": MODEL, "messages": [{"role": "user", "content": "a " * 500_000}]}
    wide = {**GOOD, "messages": [{"role": "user", "content": "a " * (context_tokens - 8)}]}
    compact = {"separators": (",", ":")}
    chain = "[" * 29 + "]" * 29
    deep = b'{"model":"%s","messages":[{"role":"user","content":"hi"}],"x":[%s]}' % (
        MODEL.encode(), ",".join([chain] * 500).encode())  # fmt: skip
    tiny = {**GOOD, "messages": [{"role": "user", "content": "a"}] * 1024}
    toollist = {**GOOD, "tools": [{"type": "function", "function": {"name": f"f{i}"}}
                                  for i in range(3000)]}  # fmt: skip
    streamed = json.loads(_padded_chat(words, body_bytes, ascii_only=False))
    return {
        # "hello" runs to max_tokens (the model answers a question with 2 tokens)
        "long": json.dumps(
            {**GOOD, "max_tokens": 480, "messages": [{"role": "user", "content": "hello"}]}
        ).encode(),  # fmt: skip
        "medium": _padded_chat("hello", 1024 * 1024, ascii_only=False),
        "deep": deep,
        "tiny": json.dumps(tiny, **compact).encode(),  # type: ignore[arg-type]
        "stream": json.dumps({**streamed, "stream": True}, **compact).encode(),  # type: ignore[arg-type]
        "toollist": json.dumps(toollist, **compact).encode(),  # type: ignore[arg-type]
        "max": _padded_chat(words, body_bytes, ascii_only=False),
        "escaped": _padded_chat(accents, body_bytes, ascii_only=True),
        "tools": _padded_chat("hello", 7_000_000, ascii_only=False),
        "wide": json.dumps(wide).encode(),
        "many": json.dumps(many, **compact).encode(),  # type: ignore[arg-type]
        "huge": json.dumps(huge, **compact).encode(),  # type: ignore[arg-type]
    }


def _post(port: int, body: bytes, timeout: float = 60) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(
            "POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException):
        return 0  # no answer (the server closed the connection mid-body)
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


def _abuser(
    port: int, stop: threading.Event, bodies: dict[str, bytes], kinds: list[str],
    seen: collections.Counter[str],
) -> None:  # fmt: skip
    long = json.dumps({**GOOD, "max_tokens": 480}).encode()
    lock = threading.Lock()
    i = 0
    while not stop.is_set():
        kind = kinds[i % len(kinds)]
        i += 1
        if kind == "abandon":  # a long generation, abandoned
            head = (
                f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                f"application/json\r\nContent-Length: {len(long)}\r\n\r\n"
            ).encode()
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(head + long)
                time.sleep(0.2)
            with lock:
                seen["abandoned"] += 1
            continue
        status = _post(port, bodies[kind])
        with lock:
            seen[f"{kind} {status}"] += 1


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far (Linux ``/proc``; NaN elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
        "--abuse",
        default="max,escaped,tools,many+huge+abandon",
        help=f"comma list of scenarios, each one kind or several joined by '+' ({', '.join(KINDS)})",
    )
    parser.add_argument("--body-bytes", type=int, default=ROUND5_BODY_BYTES,
                        help="size of the max and escaped bodies (default: just under 8 MiB)")  # fmt: skip
    parser.add_argument("--threads", type=int, default=None,
                        help="pass --threads N to serve-reference (default: its own default)")  # fmt: skip
    parser.add_argument("--no-encode", action="store_true", help="skip the encode_chat table")
    args = parser.parse_args()
    scenarios = []
    for scenario in args.abuse.split(","):
        mix, _, count = scenario.partition("*")
        if count and not count.isdigit():
            parser.error(f"{scenario!r}: write kind*N with N a number of clients")
        scenarios.append((mix.split("+"), int(count or 1)))
    for kinds, _ in scenarios:
        for kind in kinds:
            if kind not in KINDS:
                parser.error(f"unknown abuse kind {kind!r}; choose from {', '.join(KINDS)}")

    if not args.no_encode:
        print("encode_chat time by message count (one pass: linear)")
        print(f"{'messages':>9} {'seconds':>8}")
        for n, took in encode_scaling():
            print(f"{n:>9} {took:>8.2f}")
        print()

    bodies = abuse_bodies(args.body_bytes, context_tokens=512)
    proc = subprocess.Popen(
        [sys.executable, "-m", "phaseaware", "serve-reference", "--host", "127.0.0.1",
         "--port", "0", *(["--threads", str(args.threads)] if args.threads else [])],
        stdout=subprocess.PIPE, env={**os.environ, "PHASEAWARE_SERVER_API_KEY": ""},
    )  # fmt: skip
    rows: list[tuple[str, list[float], str, str]] = []
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        port = int(line.split("/v1")[0].rsplit(":", 1)[1])
        _good_clients(port, args.clients, 2.0)  # warm-up (first forward passes), not measured
        rows.append(("alone", _good_clients(port, args.clients, args.seconds), "", ""))
        for kinds, count in scenarios:
            # the abuser alone: what it costs the server (CPU per request, CPU share)
            seen: collections.Counter[str] = collections.Counter()
            cost = _abuse(port, bodies, kinds, count, seen, proc.pid, args.seconds / 2)
            # then beside the well-behaved clients: their latency
            seen = collections.Counter()
            stop = threading.Event()
            abusers = [
                threading.Thread(target=_abuser, args=(port, stop, bodies, kinds, seen))
                for _ in range(count)
            ]
            for abuser in abusers:
                abuser.start()
            latencies = _good_clients(port, args.clients, args.seconds)
            stop.set()
            for abuser in abusers:
                abuser.join()
            answers = ", ".join(f"{k}: {v}" for k, v in sorted(seen.items()))
            name = "+".join(kinds) + (f"*{count}" if count > 1 else "")
            rows.append((name, latencies, cost, answers))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    sizes = ", ".join(f"{k} {len(v) / 2**20:.2f} MiB" for k, v in bodies.items() if len(v) > 2**20)
    print(f"well-behaved clients: {args.clients}, {args.seconds:g} s per phase; bodies: {sizes}")
    print(f"{'abuser':<18} {'requests':>8} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'mean ms':>8}"
          f"  {'abuser alone':<26}  abusive client's answers beside them")  # fmt: skip
    for name, lat, cost, answers in rows:
        mean = f"{1000 * statistics.fmean(lat):.0f}" if lat else "-"
        print(f"{name:<18} {len(lat):>8} {_ms(lat, 0.5):>7} {_ms(lat, 0.95):>7} "
              f"{_ms(lat, 0.99):>7} {mean:>8}  {cost:<26}  {answers}")  # fmt: skip
    print("abuser alone: its requests per second, the server's CPU per request and CPU share")
    print("(100%: one core) while only the abuser runs")


def _abuse(
    port: int, bodies: dict[str, bytes], kinds: list[str], count: int,
    seen: collections.Counter[str], pid: int, seconds: float,
) -> str:  # fmt: skip
    """Run ``count`` abusers alone for ``seconds``: ``"N/s, X ms CPU/req, Y%"``."""
    stop = threading.Event()
    abusers = [
        threading.Thread(target=_abuser, args=(port, stop, bodies, kinds, seen))
        for _ in range(count)
    ]
    cpu, started = _cpu_s(pid), time.monotonic()
    for abuser in abusers:
        abuser.start()
    time.sleep(seconds)
    stop.set()
    for abuser in abusers:
        abuser.join()
    took = time.monotonic() - started
    used = _cpu_s(pid) - cpu
    n = max(1, sum(seen.values()))
    return f"{n / took:.1f}/s, {1000 * used / n:.0f} ms/req, {used / took:.0%}"


if __name__ == "__main__":
    main()
