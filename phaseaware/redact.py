"""One redaction rule for every message and log line that may hold a secret.

``redact(text)`` replaces the credentials of URLs (``http://user:pass@host`` ->
``http://***@host``), ``Authorization: Bearer <token>`` values and
OpenAI-style keys (``sk-...``) with ``***``. A bearer value runs to the end of its line or
quote, whitespace included (an API key may hold spaces: ``Bearer one two`` must not leave
``two``), so text after it on the same line is hidden too. Used by the command line's error
line, the openai backend's errors and the calibration log header.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["redact", "redact_url"]

_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/@'\"]+@")
_BEARER = re.compile(r"(?i)\b(bearer[ \t]+)[^\r\n'\"]+")
_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")


def redact(text: str) -> str:
    """``text`` with URL credentials, bearer tokens and ``sk-`` keys replaced by ``***``."""
    text = _URL_CREDENTIALS.sub(r"\1***@", text)
    text = _BEARER.sub(r"\1***", text)
    return _KEY.sub("sk-***", text)


def redact_url(url: str) -> str:
    """``url`` without its user and password (``***`` where they were)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]  # as written: case and IPv6 brackets kept
    return urlunsplit(parts._replace(netloc=f"***@{host}"))
