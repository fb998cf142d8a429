"""Flags several commands share (one definition each).

``--chat-format F`` names the chat format (``none``, ``chatml``, ``hf``,
``deepseek-v4``, ``deepseek-v4.1``, or a registered one) everywhere;
``--trust-profiles`` accepts profile files other users can write; the HTTP backend's
flags (``--base-url`` … ``--max-retries``) are the same on ``calibrate`` and ``compare``.
"""

from __future__ import annotations

import argparse

from phaseaware.cli.argtypes import integer, seconds

#: A parser or one of its argument groups (``--help`` lists a group under its title).
Flags = argparse.ArgumentParser | argparse._ArgumentGroup

__all__ = [
    "add_chat_format",
    "add_openai_backend",
    "add_trust_flag",
    "check_openai_server",
    "check_server",
]


def add_chat_format(parser: Flags, *, help: str, required: bool = False) -> None:
    """``--chat-format F`` (into ``args.chat_format``; ``required``: it must be given)."""
    parser.add_argument(
        "--chat-format", dest="chat_format", metavar="F", required=required, help=help
    )


def add_trust_flag(parser: argparse.ArgumentParser) -> None:
    """``--trust-profiles``: accept profile files other users can write (see
    :mod:`phaseaware.profiles.trust`); the same as ``PHASEAWARE_TRUST_PROFILES=1``."""
    parser.add_argument(
        "--trust-profiles",
        action="store_true",
        help="use profile files that other users can write (group/world-writable file or "
        "folder); same as PHASEAWARE_TRUST_PROFILES=1",
    )


def add_openai_backend(parser: Flags, *, concurrency_help: str) -> None:
    """The flags of ``--backend openai`` (an OpenAI-compatible server, official client)."""
    add = parser.add_argument
    add("--base-url", help="--backend openai: server URL, e.g. http://localhost:8000/v1")
    add(
        "--api-key-file",
        help="--backend openai: read the API key from this file (else PHASEAWARE_API_KEY "
        "or OPENAI_API_KEY)",
    )
    add("--api-key", help="--backend openai: API key (visible to other users: prefer the env)")
    add("--endpoint", choices=("chat", "completions"), default="chat", help="openai endpoint")
    add("--concurrency", type=integer(1, 1024), default=4, help=concurrency_help)
    add(
        "--timeout",
        type=seconds(),
        default=60.0,
        help="--backend openai: seconds per HTTP attempt, connect to last byte (default 60)",
    )
    add(
        "--max-retries",
        type=integer(0, 100),
        default=5,
        help="--backend openai: retries of 408/409/429/5xx/timeouts per request (default 5)",
    )


def check_server(base_url: str | None, *, error: type[Exception]) -> None:
    """Raise ``error`` naming the command that starts a server when nothing accepts a
    connection at ``base_url`` within 3 s (before the command's work, and before the
    client's retries of a refused connection)."""
    from phaseaware.httpclient import START_A_SERVER, unreachable
    from phaseaware.redact import redact_url

    if not base_url:
        return
    why = unreachable(base_url)
    if why is not None:
        raise error(f"cannot reach the server at {redact_url(base_url)} ({why}): {START_A_SERVER}")


def check_openai_server(base_url: str | None, *, api_key: str | None) -> None:
    """``--backend openai`` before any work: the key first (one no header can carry is
    named, as the backend would), then :func:`check_server`."""
    from phaseaware.calibration.backends.openai import resolve_api_key
    from phaseaware.errors import BackendError

    resolve_api_key(api_key)
    check_server(base_url, error=BackendError)
