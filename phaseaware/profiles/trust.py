"""Profiles that other users could have written are not trusted by default.

A profile decides where evidence goes: whoever can edit it can turn placement
off (a huge ``local_window``) or steer keys onto bad residues. So, as ``ssh`` does
for its keys, a profile file owned by another user (root aside), group- or
world-writable, or under any folder (up to the home folder or the root) that
another user owns or can write to (without the sticky bit, or with it but the entry
below owned by someone else), is refused with a ``ProfileError`` that names the fix. ``PHASEAWARE_TRUST_PROFILES=1``
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


def _trusted_owner(uid: int) -> bool:
    return uid in (os.getuid(), 0)


def check_trusted(path: str | os.PathLike[str]) -> None:
    """Raise ``ProfileError`` if users other than this one (and root) could have written
    ``path``: the file and every folder above it, up to the home folder or the root, must be
    owned by this user or root and writable by no one else, as ``ssh`` requires of its keys
    (a folder others can write to is accepted only with the sticky bit and the entry below
    it owned by this user or root: then no one else can replace that entry)."""
    if os.name == "nt" or trust_profiles():
        return
    target = Path(os.path.realpath(path))
    try:
        info = target.stat()
    except OSError:
        return  # the reader reports a missing or unreadable file with its own message
    fix = f"set {ENV_TRUST}=1 (or pass --trust-profiles) if you trust everyone who can write it"
    if not _trusted_owner(info.st_uid):
        raise ProfileError(
            f"profile file {path} belongs to another user (uid {info.st_uid}): they could "
            f"change the accuracies it claims; copy it to a file of your own, or {fix}"
        )
    if info.st_mode & _OTHERS_WRITE:
        raise ProfileError(
            f"profile file {path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}): "
            f"anyone could change the accuracies it claims; run `chmod go-w {path}`, or {fix}"
        )
    _check_folders(target, info.st_uid, path=path, fix=fix)


def _check_folders(target: Path, owner: int, *, path: str | os.PathLike[str], fix: str) -> None:
    """Every folder above ``target`` (owned by ``owner``) up to the home folder or the root."""
    home = Path(os.path.realpath(Path.home()))
    child_owner = owner
    for folder in target.parents:
        try:
            info = folder.stat()
        except OSError:
            return
        where = "is in folder" if folder == target.parent else "is under folder"
        if not _trusted_owner(info.st_uid):
            raise ProfileError(
                f"profile file {path} {where} {folder}, which belongs to another user (uid "
                f"{info.st_uid}): they could replace the profile; move it to a folder of your "
                f"own, or {fix}"
            )
        if info.st_mode & _OTHERS_WRITE:
            sticky = bool(info.st_mode & stat.S_ISVTX)
            if not sticky or not _trusted_owner(child_owner):
                raise ProfileError(
                    f"profile file {path} {where} {folder}, which other users can write to "
                    f"(mode {stat.S_IMODE(info.st_mode):o}): they could replace the profile; "
                    f"move it to a folder only you can write, or {fix}"
                )
        if folder == home:
            return
        child_owner = info.st_uid
