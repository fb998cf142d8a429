"""Flags several commands share (one definition each).

``--chat-format F`` names the chat format (``none``, ``chatml``, ``hf``,
``deepseek-v4``, ``deepseek-v4.1``, or a registered one) everywhere;
``--trust-profiles`` accepts profile files other users can write.
"""

from __future__ import annotations

import argparse

__all__ = ["add_chat_format", "add_trust_flag"]


def add_chat_format(parser: argparse.ArgumentParser, *, help: str, required: bool = False) -> None:
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
