"""Benchmark: HTTP calibration backend throughput (probes/s) by concurrency.

Run: ``PYTHONPATH=$PWD python benchmarks/calibration_http.py [--latency 0.2]``.
A loopback server (the production ASGI app on uvicorn, ``tests/support/fault_server``)
answers every request after an injected delay (default 200 ms); the engine looks
the answer up in the prompt, so the time is the HTTP path plus the delay. The
official ``openai`` client runs inside ``OpenAIBackend``. Ideal scaling:
probes/s = concurrency / latency.
"""

from __future__ import annotations

import argparse
import time

from phaseaware.calibration.backends.openai import OpenAIBackend
from tests.support.fault_server import Fault, start_server
from tests.support.task_engine import TaskLookupEngine
from tests.unit.calibration.test_backend_openai import MODEL, make_probe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.2, help="injected delay, seconds")
    parser.add_argument("--rounds", type=int, default=4, help="probes per slot of concurrency")
    args = parser.parse_args()
    delay = Fault(delay_s=args.latency)
    print(
        f"{'concurrency':>11} {'probes':>6} {'wall s':>7} {'probes/s':>8} {'ideal':>6} {'eff':>5}"
    )
    with start_server(TaskLookupEngine(), faults=lambda _: delay, engine_parallelism=None) as srv:
        for concurrency in (1, 4, 16):
            probes = [make_probe(i) for i in range(concurrency * args.rounds)]
            with OpenAIBackend(
                srv.base_url, MODEL, concurrency=concurrency, timeout=30.0,
                expected_prompt_tokens_check=False,
            ) as backend:  # fmt: skip
                list(backend.complete(probes[:concurrency]))  # connections up
                start = time.perf_counter()
                done = list(backend.complete(probes))
                wall = time.perf_counter() - start
            assert len(done) == len(probes)
            rate, ideal = len(probes) / wall, concurrency / args.latency
            print(
                f"{concurrency:>11} {len(probes):>6} {wall:>7.2f} {rate:>8.1f} {ideal:>6.1f} "
                f"{rate / ideal:>5.2f}"
            )


if __name__ == "__main__":
    main()
