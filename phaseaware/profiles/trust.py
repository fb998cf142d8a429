"""Profiles that other users could have written are not trusted by default.

A profile decides where evidence goes: whoever can edit it can turn placement
off (a huge ``local_window``) or steer keys onto bad residues. So a profile file
that is group- or world-writable, or sits in a folder others can write to (one
without the sticky bit, or with it but the file owned by someone else), is
refused with a ``ProfileError`` that names the fix. ``PHASEAWARE_TRUST_PROFILES=1``
(the CLI's ``--trust-profiles``) accepts such files. Not checked on Windows,
where these mode bits do not describe who may write.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from phaseaware.errors import ProfileError

__all__ = ["ENV_TRUST", "check_trusted", "trust_profiles", "trusting_profiles"]

ENV_TRUST = "PHASEAWARE_TRUST_PROFILES"
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_TRUSTING: ContextVar[bool] = ContextVar("phaseaware_trust_profiles", default=False)


def trust_profiles() -> bool:
    """Whether the user said to trust profiles others can write (``$PHASEAWARE_TRUST_PROFILES``
    or inside :func:`trusting_profiles`)."""
    if _TRUSTING.get():
        return True
    return os.environ.get(ENV_TRUST, "").strip().lower() in ("1", "true", "yes")


@contextlib.contextmanager
def trusting_profiles() -> Iterator[None]:
    """Trust profiles others can write inside the ``with`` block (the CLI's ``--trust-profiles``)."""
    token = _TRUSTING.set(True)
    try:
        yield
    finally:
        _TRUSTING.reset(token)


def check_trusted(path: str | os.PathLike[str]) -> None:
    """Raise ``ProfileError`` if users other than the owner could have written ``path``."""
    if os.name == "nt" or trust_profiles():
        return
    target = Path(os.path.realpath(path))
    try:
        info = target.stat()
        folder = target.parent.stat()
    except OSError:
        return  # the reader reports a missing or unreadable file with its own message
    fix = f"set {ENV_TRUST}=1 (or pass --trust-profiles) if you trust everyone who can write it"
    if info.st_mode & _OTHERS_WRITE:
        raise ProfileError(
            f"profile file {path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}): "
            f"anyone could change the accuracies it claims; run `chmod go-w {path}`, or {fix}"
        )
    if folder.st_mode & _OTHERS_WRITE:
        sticky = bool(folder.st_mode & stat.S_ISVTX)
        if not sticky or info.st_uid not in (os.getuid(), 0):
            raise ProfileError(
                f"profile file {path} is in folder {target.parent}, which other users can "
                f"write to (mode {stat.S_IMODE(folder.st_mode):o}): they could replace the "
                f"profile; move it to a folder only you can write, or {fix}"
            )
