"""The examples' reference server: ``phaseaware serve-reference --port 0`` as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["reference_server"]


@contextmanager
def reference_server(*, stderr: int | None = None) -> Iterator[str]:
    """Start ``phaseaware serve-reference --port 0`` offline; yields its base URL.

    ``stderr`` goes to ``subprocess.Popen`` (``subprocess.DEVNULL`` hides the server's log).
    """
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "phaseaware", "serve-reference", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if " at http://" not in line:
            raise SystemExit(f"serve-reference did not start (exit code {proc.poll()}): {line!r}")
        yield line.split(" at ")[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
