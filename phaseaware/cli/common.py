"""Flags several commands share (one definition each)."""

from __future__ import annotations

import argparse

__all__ = ["add_trust_flag"]


def add_trust_flag(parser: argparse.ArgumentParser) -> None:
    """``--trust-profiles``: accept profile files other users can write (see
    :mod:`phaseaware.profiles.trust`); the same as ``PHASEAWARE_TRUST_PROFILES=1``."""
    parser.add_argument(
        "--trust-profiles",
        action="store_true",
        help="use profile files that other users can write (group/world-writable file or "
        "folder); same as PHASEAWARE_TRUST_PROFILES=1",
    )
