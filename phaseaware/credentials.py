"""API keys are checked before they go into an HTTP header, and never echoed.

An ``Authorization: Bearer KEY`` header can carry only visible ASCII. A key
with a newline (a trailing ``\\n`` in ``OPENAI_API_KEY`` is common), a space,
a control or a non-ASCII character otherwise fails deep inside the HTTP
client with a message that says nothing useful (or looks like a network error).
:func:`check_api_key` refuses it up front and says what is wrong, never what
the key is.
"""

from __future__ import annotations

from phaseaware.errors import InputError, PhaseawareError

__all__ = ["api_key_from_env", "api_key_problem", "check_api_key"]


def api_key_problem(key: str) -> str | None:
    """What makes ``key`` unusable in an HTTP header (``None``: nothing). Never the key."""
    for char in key:
        if char in "\r\n":
            return "contains a newline"
        if char == " ":
            return "contains a space"
        if char == "\t" or ord(char) < 0x20 or ord(char) == 0x7F:
            return "contains a control character"
        if ord(char) > 0x7E:
            return "contains a non-ASCII character"
    return None


def check_api_key(key: str, *, source: str, error: type[PhaseawareError] = InputError) -> str:
    """``key`` if an HTTP header can carry it, else ``error`` naming ``source`` (not the key).

    ``source`` says where the key came from, e.g. ``"$OPENAI_API_KEY"`` or
    ``"--api-key-file keys.txt"``.
    """
    problem = api_key_problem(key)
    if problem is not None:
        raise error(
            f"the API key from {source} {problem}, which an HTTP header cannot carry; "
            "remove it (a trailing newline often comes from `echo` or a copied line)"
        )
    return key


def api_key_from_env(
    names: tuple[str, ...], *, error: type[PhaseawareError] = InputError
) -> str | None:
    """The first non-empty environment variable of ``names``, checked (:func:`check_api_key`,
    the variable named in the error); ``None`` when none is set."""
    import os

    for name in names:
        value = os.environ.get(name)
        if value:
            return check_api_key(value, source=f"${name}", error=error)
    return None
