"""Benchmark: cold start of ``phaseaware assemble examples/request.json`` (DeepSeek-V4).

Run: ``python benchmarks/cold_start.py [--runs 5]`` from the repository root.

Each row is the median wall time of ``--runs`` fresh processes (run in turn, after one
unmeasured warm-up of each so that every row sees the same warm file cache), side by
side in the same run:

- ``phaseaware assemble examples/request.json`` (``python -m phaseaware``; the example
  names the DeepSeek-V4 tokenizer, layout and built-in profile);
- ``Tokenizer.from_file(<DeepSeek-V4 tokenizer.json>)`` through ``tokenizers`` alone: the
  floor of any exact load of that tokenizer;
- ``python -c pass``: the interpreter's own start.

Columns: median, min and max wall time, the median less the interpreter's, and the
median CPU time (user + system) of the process. The assemble run's stdout is
checked to be the same in every run (the benchmark never changes an output).

Bytecode: by default the processes share a fresh bytecode cache (``PYTHONPYCACHEPREFIX``
in a temporary folder, filled by the warm-up), as an installed package has its ``.pyc``
files; ``--no-bytecode`` sets ``PYTHONDONTWRITEBYTECODE`` instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "examples/request.json"


def _tokenizer_json() -> str:
    from phaseaware.tokenizers.registry import deepseek_v4_dir

    return str(deepseek_v4_dir() / "tokenizer.json")


def _commands() -> list[tuple[str, list[str]]]:
    load = f"import tokenizers; tokenizers.Tokenizer.from_file({_tokenizer_json()!r})"
    return [
        (
            f"phaseaware assemble {EXAMPLE}",
            [sys.executable, "-m", "phaseaware", "assemble", EXAMPLE],
        ),
        ("tokenizers.Tokenizer.from_file(deepseek-v4)", [sys.executable, "-c", load]),
        ("python -c pass", [sys.executable, "-c", "pass"]),
    ]


def _time_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, bytes]:
    """Wall seconds, CPU seconds (user + system: less sensitive to a busy machine), stdout."""
    start = time.perf_counter()
    with subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE) as proc:
        stdout = proc.stdout.read() if proc.stdout is not None else b""
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per row (median)")
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="compile every module from source in every process (as PYTHONDONTWRITEBYTECODE "
        "does without a bytecode cache); default: a fresh bytecode cache, as an install has",
    )
    args = parser.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="phaseaware-cold-start-") as cache:
        if args.no_bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:  # an installed package has its .pyc files; keep them out of the source tree
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = cache
        _run(args.runs, env, bytecode=not args.no_bytecode)


def _run(runs: int, env: dict[str, str], *, bytecode: bool) -> None:
    commands = _commands()
    for _, argv in commands:  # warm-up: file cache, bytecode cache
        _time_once(argv, env)
    walls: dict[str, list[float]] = {name: [] for name, _ in commands}
    cpus: dict[str, list[float]] = {name: [] for name, _ in commands}
    outputs: set[bytes] = set()
    for _ in range(runs):  # interleaved, so that machine noise hits every row alike
        for name, argv in commands:
            wall, cpu, stdout = _time_once(argv, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
            if name.startswith("phaseaware"):
                outputs.add(stdout)
    if len(outputs) != 1:
        raise SystemExit("phaseaware assemble printed different outputs across runs")
    floor = statistics.median(walls["python -c pass"])
    cached = "bytecode cached" if bytecode else "no bytecode cache"
    print(f"cold start, median of {runs} fresh processes ({cached}; seconds)")
    print(f"{'command':<46} {'wall':>7} {'min':>7} {'max':>7} {'- python':>9} {'cpu':>7}")
    for name, values in walls.items():
        median = statistics.median(values)
        print(
            f"{name:<46} {median:>7.3f} {min(values):>7.3f} {max(values):>7.3f} "
            f"{median - floor:>9.3f} {statistics.median(cpus[name]):>7.3f}"
        )


if __name__ == "__main__":
    main()
