"""Printing a calibration's progress and report: shared by ``calibrate`` and its batch modes."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["Progress", "print_report"]


def print_report(result: Any, *, as_json: bool = False, plot: str | None = None) -> None:
    """Print a calibration's report (JSON with ``as_json``); save its chart to ``plot``."""
    from phaseaware.calibration.report import format_report, save_plot, summary_dict

    if plot:
        save_plot(result, plot)
    print(json.dumps(summary_dict(result), indent=2) if as_json else format_report(result))


class Progress:
    """A plain progress bar with ETA on stderr; silent when stderr is not a TTY. With
    ``log``, its first call says (always) when the run resumes that log or reuses it whole."""

    def __init__(
        self, *, label: str = "calibrate", unit: str = "probes", log: Path | None = None
    ) -> None:
        self.label, self.unit, self.log = label, unit, log
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.first_done: int | None = None
        self.done = self.total = 0

    def __call__(self, done: int, total: int, record: Any) -> None:
        if self.first_done is None:
            self.first_done, self.start = done, time.monotonic()
            if self.log is not None and done:
                saved = "all" if done >= total else f"{done} of {total}"
                print(
                    f"phaseaware: resuming {self.log}: {saved} {self.unit} already saved "
                    "(--fresh starts over)",
                    file=sys.stderr,
                )
        self.done, self.total = done, total
        if not self.tty:
            return
        ran = done - self.first_done
        elapsed = time.monotonic() - self.start
        eta = elapsed / ran * (total - done) if ran else float("nan")
        width = 30
        filled = int(width * done / max(total, 1))
        eta_text = "--" if eta != eta else f"{eta:.0f}s"
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} ETA {eta_text} "
        )
        sys.stderr.flush()

    def finish(self) -> None:
        if self.tty:
            sys.stderr.write("\n")
        elapsed = time.monotonic() - self.start
        print(
            f"{self.label}: {self.done}/{self.total} {self.unit} done ({elapsed:.1f}s this run)",
            file=sys.stderr,
        )
