"""The examples' reference server: ``phaseaware serve-reference --port 0`` as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["reference_server"]


@contextmanager
def reference_server() -> Iterator[str]:
    """Start ``phaseaware serve-reference --port 0`` offline; yields its base URL.

    The server's log goes to a temporary file; when the server does not start, its own
    last message (a missing extra, say) ends the example as one line, exit 1.
    """
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "phaseaware", "serve-reference", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if " at http://" not in line:
                proc.wait(timeout=30)
                log.seek(0)
                said = [s for s in log.read().splitlines() if s.strip()]
                reason = said[-1] if said else f"exit code {proc.returncode}, no message"
                print(f"serve-reference did not start: {reason}", file=sys.stderr)
                raise SystemExit(1)
            yield line.split(" at ")[1].split()[0]
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
