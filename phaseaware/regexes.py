"""Regular expressions that are untrusted, or run over untrusted text, with a time limit.

A pattern such as ``(a|aa)+$`` backtracks exponentially on an ordinary needle or
completion; Python's ``re`` has no way to stop it. Patterns the user or an input file
supplies (``score --key-regex``, ``compare --grader regex``) are compiled with the
``regex`` package (already a dependency; ``re``-compatible syntax, VERSION0) and every
search runs under :data:`SEARCH_SECONDS`; past it the search raises
:class:`~phaseaware.errors.InputError` naming the pattern and the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import regex

from phaseaware.errors import InputError

__all__ = ["SEARCH_SECONDS", "UntrustedPattern", "compile_untrusted"]

#: The longest one search may run, in seconds.
SEARCH_SECONDS = 1.0


@dataclass(frozen=True)
class UntrustedPattern:
    """A compiled pattern whose every search is bounded in time.

    ``source`` names where the pattern came from in errors (``"--key-regex"``).
    """

    text: str
    source: str
    compiled: Any  # regex.Pattern[str]
    timeout: float = SEARCH_SECONDS

    @property
    def groups(self) -> int:
        return int(self.compiled.groups)

    def search(self, text: str) -> Any:
        """``regex.Match`` or ``None``; raises ``InputError`` past :attr:`timeout` seconds."""
        try:
            return self.compiled.search(text, timeout=self.timeout)
        except TimeoutError:
            raise InputError(
                f"{self.source} pattern {self.text[:200]!r} ran over its {self.timeout:g} s "
                f"time limit on a {len(text)}-character text (it backtracks without end); "
                "simplify the pattern"
            ) from None


def compile_untrusted(
    text: str, *, source: str, ignore_case: bool = False, timeout: float = SEARCH_SECONDS
) -> UntrustedPattern:
    """``text`` compiled with the ``regex`` package; ``InputError`` naming ``source`` when it
    is not a valid pattern."""
    flags = regex.IGNORECASE if ignore_case else 0
    try:
        compiled = regex.compile(text, flags | regex.VERSION0)
    except (regex.error, ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise InputError(f"{source} {text[:200]!r} is not a regular expression ({exc})") from None
    return UntrustedPattern(text=text, source=source, compiled=compiled, timeout=timeout)
