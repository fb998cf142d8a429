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
_SECRET_QUERY = re.compile(r"(?i)((?:api[_-]?key|key|token|secret|password|sig)=)[^&]*")


def redact(text: str) -> str:
    """``text`` with URL credentials, bearer tokens and ``sk-`` keys replaced by ``***``."""
    text = _URL_CREDENTIALS.sub(r"\1***@", text)
    text = _BEARER.sub(r"\1***", text)
    return _KEY.sub("sk-***", text)


def redact_url(url: str) -> str:
    """``url`` without credentials: ``user:pass@`` becomes ``***@`` (the host kept as
    written) and secret-looking query values (``api_key=``, ``key=``, ``token=``,
    ``secret=``, ``password=``, ``sig=``) become ``***``. An unparseable URL is not
    echoed at all. THE rule for URLs in messages, logs and endpoint records."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = _SECRET_QUERY.sub(r"\1***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
