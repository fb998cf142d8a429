"""Chart files (``--plot``): the formats written, read off the file name, checked up front.

``score``, ``compare`` and ``calibrate`` all save ``--plot`` with matplotlib in the format
the file name's extension names. :func:`plot_format` is checked before any work or
request (an unknown extension used to fail after a whole run, its other outputs already
written) and again when the chart is saved.
"""

from __future__ import annotations

import os
from pathlib import Path

from phaseaware.errors import InputError

__all__ = ["PLOT_FORMATS", "plot_format"]

#: Extensions matplotlib's Agg backend writes without extra programs (no LaTeX, no raw).
PLOT_FORMATS = ("png", "svg", "svgz", "pdf", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp")


def plot_format(path: str | os.PathLike[str], *, flag: str = "--plot") -> str:
    """The chart format of ``path`` (its extension, lower case; none: ``png``), or an
    ``InputError`` naming ``flag`` and the formats written."""
    suffix = Path(path).suffix.lstrip(".").lower()
    if not suffix:
        return "png"
    if suffix not in PLOT_FORMATS:
        raise InputError(
            f"{flag} {os.fspath(path)!r}: cannot write a .{suffix} chart; name a file ending "
            f"in one of {', '.join('.' + f for f in PLOT_FORMATS)}"
        )
    return suffix
