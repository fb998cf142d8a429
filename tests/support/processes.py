"""A real server process on loopback for the test tiers: start, wait until ready, stop."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

__all__ = ["free_port", "serve_process"]


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def serve_process(
    cmd: Sequence[str],
    *,
    ready_url: str,
    log: Path,
    env: Mapping[str, str],
    name: str,
    timeout_s: float,
    poll_s: float,
) -> Iterator[float]:
    """Run ``cmd`` (output to ``log``) until ``ready_url`` answers 200, yield the startup
    seconds, then terminate it (killed after 30 s). ``RuntimeError`` with the log's tail
    when it exits or is not ready within ``timeout_s``."""
    start = time.monotonic()
    with log.open("wb") as sink:
        proc = subprocess.Popen(list(cmd), stdout=sink, stderr=subprocess.STDOUT, env=dict(env))
        try:
            while not _ready(ready_url):
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {proc.returncode} during startup:\n"
                        + log.read_text(errors="replace")[-4000:]
                    )
                if time.monotonic() - start > timeout_s:
                    raise RuntimeError(
                        f"{name} not ready after {timeout_s:.0f} s:\n"
                        + log.read_text(errors="replace")[-4000:]
                    )
                time.sleep(poll_s)
            yield time.monotonic() - start
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
