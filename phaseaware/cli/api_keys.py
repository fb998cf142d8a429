"""API keys from the command line: ``--api-key-file``, ``--api-key`` or an environment variable.

One reader for every subcommand that takes a key: the file goes through
:mod:`phaseaware.userfiles` (bounded, regular file, UTF-8), an empty file is an
error, and ``--api-key`` on the command line earns a warning (it shows in ``ps``).
Keys are never printed; one an HTTP header cannot carry (a newline, non-ASCII) is
refused (:mod:`phaseaware.credentials`).
"""

from __future__ import annotations

import argparse
import os
import sys

from phaseaware.errors import PhaseawareError

KEY_FILE_MAX_BYTES = 64 * 1024


def read_key_file(path: str, *, error: type[PhaseawareError]) -> str:
    """The stripped contents of ``--api-key-file`` ``path`` (``error`` if unreadable, or if
    the key holds a character an HTTP header cannot carry; an empty file gives ``""``)."""
    from phaseaware.credentials import check_api_key
    from phaseaware.userfiles import read_user_text

    key = read_user_text(
        path, what="--api-key-file", max_bytes=KEY_FILE_MAX_BYTES, error=error
    ).strip()
    return check_api_key(key, source=f"--api-key-file {path}", error=error)


def api_key_from_args(
    args: argparse.Namespace,
    *,
    error: type[PhaseawareError],
    env_name: str,
    read_env: bool,
) -> str | None:
    """``--api-key-file``, else ``--api-key`` (with a warning), else ``env_name`` if ``read_env``.

    ``env_name`` is named in the warning either way (the caller may read it elsewhere).
    """
    from phaseaware.credentials import check_api_key

    if args.api_key_file is not None:
        key = read_key_file(args.api_key_file, error=error)
        if not key:
            raise error(f"--api-key-file {args.api_key_file} is empty")
        return key
    if args.api_key:
        print(
            "phaseaware: warning: --api-key is visible to other users of this machine "
            f"(ps, shell history); set {env_name} or use --api-key-file",
            file=sys.stderr,
        )
        return check_api_key(str(args.api_key), source="--api-key", error=error)
    value = (os.environ.get(env_name) or None) if read_env else None
    return None if value is None else check_api_key(value, source=f"${env_name}", error=error)
