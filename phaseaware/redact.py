"""One redaction rule for every message and log line that may hold a secret.

``redact(text)`` replaces the credentials of URLs (``http://user:pass@host`` ->
``http://***@host``), ``Authorization: Bearer <token>`` values and
OpenAI-style keys (``sk-...``) with ``***``, and every URL in the text goes through
:func:`redact_url`. A bearer value runs to the end of its line or quote, whitespace included
(an API key may hold spaces: ``Bearer one two`` must not leave ``two``), so text after it on
the same line is hidden too. Used by the command line's error line, the openai backend's
errors and the calibration log header.

:func:`redact_url` keeps what locates a server and hides every part that can carry a secret
(gateways put keys in paths, ``;params`` and fragments as well as in credentials and
queries): the scheme, host and port; the path's *API root*, up to and including its version
segment (``/v1``), where only plain words (``openai``, ``serving-endpoints``) are shown;
after the root only the OpenAI route names (``chat``, ``completions``, ``tokenize``, ...).
Any other path segment, every ``;param``, the fragment and the values of secret-looking
query keys become ``***``.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["redact", "redact_url"]

_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/@'\"]+@")
_BEARER = re.compile(r"(?i)\b(bearer[ \t]+)[^\r\n'\"]+")
_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")
_SECRET_QUERY = re.compile(r"(?i)((?:api[_-]?key|key|token|secret|password|sig)=)[^&]*")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s'\"<>`]+")
_VERSION = re.compile(r"(?i)^v\d+(?:(?:alpha|beta)\d*)?$")
_PLAIN_WORD = re.compile(r"^[a-z][a-z-]{0,23}$")
#: Path segments shown after the API root: OpenAI-compatible route names.
ROUTE_NAMES = frozenset(
    {"chat", "completions", "tokenize", "detokenize", "models", "embeddings", "batches",
     "files", "responses", "health", "version", "render"}
)  # fmt: skip


def redact(text: str) -> str:
    """``text`` with URL credentials, bearer tokens and ``sk-`` keys replaced by ``***``,
    and every URL in it as :func:`redact_url` shows it."""
    text = _URL_CREDENTIALS.sub(r"\1***@", text)
    text = _URL.sub(lambda m: _redact_url_in_text(m.group(0)), text)
    text = _BEARER.sub(r"\1***", text)
    return _KEY.sub("sk-***", text)


def _redact_url_in_text(url: str) -> str:
    trail = len(url) - len(url.rstrip(".,;:)]}"))  # sentence punctuation after a URL
    body, tail = (url[:-trail], url[-trail:]) if trail else (url, "")
    shown = redact_url(body)
    return (body if shown == "<unparseable url>" else shown) + tail


def _redact_path(path: str) -> str:
    """``path`` with every segment that could hold a secret as ``***`` (see the module)."""
    segments = path.split("/")
    root = next((i for i, seg in enumerate(segments) if _VERSION.match(seg.split(";")[0])), None)
    out: list[str] = []
    for index, segment in enumerate(segments):
        name, semi, _ = segment.partition(";")
        before_root = root is None or index <= root
        shown = (
            not name
            or name in ROUTE_NAMES
            or _VERSION.match(name) is not None
            or (before_root and _PLAIN_WORD.match(name) is not None)
        )
        out.append((name if shown else "***") + (";***" if semi else ""))
    return "/".join(out)


def redact_url(url: str) -> str:
    """``url`` without credentials: ``user:pass@`` becomes ``***@`` (the host kept as
    written), path segments outside the module's rule, ``;params`` and the fragment become
    ``***``, and secret-looking query values (``api_key=``, ``key=``, ``token=``,
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
    fragment = "***" if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, _redact_path(parts.path), query, fragment))
