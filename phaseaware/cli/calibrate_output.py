"""Printing a calibration's report: shared by ``calibrate`` and its batch modes."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["print_report"]


def print_report(result: Any, *, as_json: bool = False, plot: str | None = None) -> None:
    """Print a calibration's report (JSON with ``as_json``); save its chart to ``plot``."""
    from phaseaware.calibration.report import format_report, save_plot, summary_dict

    if plot:
        save_plot(result, plot)
    print(json.dumps(summary_dict(result), indent=2) if as_json else format_report(result))
