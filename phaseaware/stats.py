"""Moved to :mod:`phaseaware.intervals`; this shim keeps the old import path working."""

from phaseaware.intervals import Z_95, wilson_interval

__all__ = ["Z_95", "wilson_interval"]
