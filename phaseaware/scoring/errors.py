"""The errors of ``phaseaware score``: a log it cannot read, or a request it cannot honour."""

from __future__ import annotations

from phaseaware.errors import InputError

__all__ = ["EvalLogError"]


class EvalLogError(InputError):
    """An eval log that cannot be scored as a whole (unreadable, wrong format, nothing usable).

    A single bad sample is never an error: it is skipped with its reason.
    """
