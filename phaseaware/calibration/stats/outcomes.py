"""Calibration outcomes as an array: base prompts (rows) × residues (columns).

``1`` = correct, ``0`` = wrong, ``NaN`` (or ``-1`` on input) = missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from phaseaware.errors import InputError

__all__ = ["as_outcomes", "complete_rows"]


def as_outcomes(outcomes: Any) -> np.ndarray:
    """Return a new float array (base prompts × residues): 0.0, 1.0, or NaN for missing.

    Accepts bools, ints (``-1`` = missing) or floats (``NaN`` = missing).
    Raises ``InputError`` for anything that is not 2-D or holds other values.
    """
    arr = np.array(outcomes, dtype=float, copy=True)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise InputError(
            f"outcomes must be a 2-D array (base prompts x residues), got shape {arr.shape}; "
            "pass one row per base prompt and one column per residue"
        )
    arr[arr == -1] = np.nan
    ok = np.isnan(arr) | (arr == 0) | (arr == 1)
    if not ok.all():
        bad = np.unique(arr[~ok])[:5].tolist()
        raise InputError(
            f"outcomes must be 0/1 (NaN or -1 for missing), found {bad}; "
            "score each probe as correct (1) or not (0)"
        )
    return arr


def complete_rows(arr: np.ndarray) -> np.ndarray:
    """Rows of ``arr`` (from ``as_outcomes``) with no missing outcome."""
    rows: np.ndarray = arr[~np.isnan(arr).any(axis=1)]
    return rows
