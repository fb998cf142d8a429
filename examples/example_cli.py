"""How the examples fail: like the command line, one line that says what to run.

``needs()`` wraps an example's imports: a missing package ends the example with exit 1
and the install command. ``run(main)`` wraps its ``main``: a server that cannot be reached,
or any phaseaware error, is one line on stderr and exit 1, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from phaseaware.extras import install_line

# import name -> the command that installs it, from a clone of the repository
INSTALL = {
    "langchain": 'pip install -e "integrations/langchain[agents]"',
    "langchain_core": "pip install -e integrations/langchain",
    "langchain_phaseaware": "pip install -e integrations/langchain",
    "langchain_openai": "pip install langchain-openai",
    "llama_index": "pip install -e integrations/llama-index",
    "llama_index.llms.phaseaware": "pip install -e integrations/llama-index-llms",
    "llama_index.llms.openai_like": "pip install llama-index-llms-openai-like",
    "rank_bm25": "pip install rank-bm25",
    "haystack": "pip install -e integrations/haystack",
    "haystack_integrations": "pip install -e integrations/haystack",
    # phaseaware's own extras: the command phaseaware itself prints for them
    "openai": install_line("openai"),
    **dict.fromkeys(("torch", "transformers", "safetensors", "uvicorn"), install_line("reference")),
}


def install_command(module: str) -> str:
    """The install command for ``module`` (its longest known dotted prefix)."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        found = INSTALL.get(".".join(parts[:i]))
        if found:
            return found
    return f"pip install {parts[0].replace('_', '-')}"


def _fail(message: str) -> None:
    print(f"{sys.argv[0] or 'example'}: {message}", file=sys.stderr)
    raise SystemExit(1)


@contextmanager
def needs() -> Iterator[None]:
    """Around an example's imports: a missing package is one line naming its install."""
    try:
        yield
    except ModuleNotFoundError as exc:
        name = exc.name or str(exc)
        _fail(f"this example needs the package `{name}`: {install_command(name)}")


def run(main: Callable[[], int]) -> int:
    """Call ``main``; a missing server, package or phaseaware error is one line, exit 1."""
    try:
        return main()
    except ModuleNotFoundError as exc:  # a lazy import inside phaseaware or a framework
        name = exc.name or str(exc)
        _fail(f"this example needs the package `{name}`: {install_command(name)}")
    except KeyboardInterrupt:
        _fail("interrupted")
    except Exception as exc:
        _fail(_one_line(exc))
    return 1  # not reached


def _one_line(exc: BaseException) -> str:
    from phaseaware.errors import PhaseawareError

    if isinstance(exc, PhaseawareError):
        return str(exc).splitlines()[0]
    cause: BaseException | None = exc
    while cause is not None:  # frameworks wrap the client's connection error
        if type(cause).__name__ in ("APIConnectionError", "ConnectError", "ConnectionError"):
            return (
                "cannot reach the model server (connection refused or no such host): start "
                "one with `phaseaware serve-reference --port 8000` and pass "
                "--base-url http://127.0.0.1:8000/v1, or leave out --base-url to let the "
                "example start it"
            )
        if type(cause).__name__ == "APIStatusError" or hasattr(cause, "status_code"):
            return f"the server refused the request: {str(cause).splitlines()[0]}"
        cause = cause.__cause__ or cause.__context__
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
