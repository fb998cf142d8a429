"""The vLLM tier: one real vLLM OpenAI server per tokenizer mode.

The V4.1 and reference servers run with ``--enable-scale-out`` (vLLM's render endpoint,
``/v1/chat/completions/render``), the V4 and V3 servers without it, so the probe is
covered on both of its id routes (render, and ``/tokenize`` where render is disabled).

The DeepSeek-V4 server is shared by the session; the others (V4.1, V3, reference) are
used by one test each and run one at a time (starting one stops the last), so at most two
engines hold memory at once on a 2-core, 24 GiB CI machine.

Skipped, with the reason, only when ``PHASEAWARE_VLLM_PYTHON`` is unset (scripts/test.sh
always sets it). At the end the session prints the table of token comparisons
(setting x conversations matched) and, when ``PHASEAWARE_VLLM_TABLE`` names a file,
writes it there as JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.vllm_server import (
    VLLM_PYTHON_ENV,
    VllmServer,
    build_model_dir,
    deepseek_v3_files,
    deepseek_v4_files,
    reference_files,
    start_server,
    vllm_python,
)

# (setting, case) -> matched?; filled by the tests, printed at the end
RESULTS: dict[tuple[str, str], tuple[bool, str]] = {}
TIMINGS: dict[str, float] = {}
_T0 = time.monotonic()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.vllm)
            if vllm_python() is None:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"{VLLM_PYTHON_ENV} is unset: run scripts/install_vllm.sh and "
                        "export its printed interpreter path (scripts/test.sh does both)"
                    )
                )


def _server(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    source: Path,
    *,
    mode: str | None,
    tokenizer_class: str | None = None,
    scale_out: bool = False,
    extra_args: tuple[str, ...] = (),
) -> Iterator[VllmServer]:
    parser = mode if mode in ("deepseek_v4", "deepseek_v41") else None
    if vllm_python() is None:
        pytest.skip(f"{VLLM_PYTHON_ENV} is unset")
    folder = tmp_path_factory.mktemp(f"vllm-{name}")
    model = build_model_dir(folder / "model", source, tokenizer_class=tokenizer_class)
    with start_server(
        model,
        tokenizer_mode=mode,
        log=folder / "server.log",
        label=name,
        tool_parser=parser,
        scale_out=scale_out,
        extra_args=extra_args,
    ) as server:
        TIMINGS[f"startup {name}"] = server.startup_s
        yield server


@pytest.fixture(scope="session")
def vllm_v4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    yield from _server(tmp_path_factory, "v4", deepseek_v4_files(), mode="deepseek_v4")


class _OneAtATime:
    """Starts a named server on first use and stops the previous one first."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._name: str | None = None
        self._server: VllmServer | None = None
        self._stack = contextlib.ExitStack()

    def get(self, name: str, start: Callable[[], Iterator[VllmServer]]) -> VllmServer:
        if self._name != name:
            self.close()
            generator = start()
            self._server = next(generator)
            self._stack.callback(lambda: next(generator, None))
            self._name = name
        assert self._server is not None
        return self._server

    def close(self) -> None:
        self._stack.close()
        self._stack = contextlib.ExitStack()
        self._name, self._server = None, None


@pytest.fixture(scope="session")
def _one_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_OneAtATime]:
    pool = _OneAtATime(tmp_path_factory)
    yield pool
    pool.close()


@pytest.fixture
def vllm_v41(_one_at_a_time: _OneAtATime, tmp_path_factory: pytest.TempPathFactory) -> VllmServer:
    return _one_at_a_time.get(
        "v41",
        lambda: _server(
            tmp_path_factory, "v41", deepseek_v4_files(), mode="deepseek_v41", scale_out=True
        ),
    )


@pytest.fixture
def vllm_v3(_one_at_a_time: _OneAtATime, tmp_path_factory: pytest.TempPathFactory) -> VllmServer:
    return _one_at_a_time.get(
        "v3",
        lambda: _server(
            tmp_path_factory,
            "v3",
            deepseek_v3_files(),
            mode=None,
            tokenizer_class="TokenizersBackend",
        ),  # fmt: skip
    )


@pytest.fixture
def vllm_reference(
    _one_at_a_time: _OneAtATime, tmp_path_factory: pytest.TempPathFactory
) -> VllmServer:
    return _one_at_a_time.get(
        "reference",
        lambda: _server(
            tmp_path_factory, "reference", reference_files(), mode=None, scale_out=True
        ),
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    settings: dict[str, list[bool]] = {}
    for (setting, _case), (ok, _why) in RESULTS.items():
        settings.setdefault(setting, []).append(ok)
    write = terminalreporter.write_line
    write("")
    write("vLLM tier: phaseaware's token ids vs the server's (/tokenize and usage.prompt_tokens)")
    width = max(len(s) for s in settings)
    for setting, oks in settings.items():
        write(f"  {setting:<{width}}  {sum(oks)}/{len(oks)}")
    for (setting, case), (ok, why) in RESULTS.items():
        if not ok:
            write(f"  MISMATCH {setting} / {case}: {why}")
    for name, seconds in TIMINGS.items():
        write(f"  {name}: {seconds:.1f} s")
    write(f"  tier wall time: {time.monotonic() - _T0:.0f} s")
    target = os.environ.get("PHASEAWARE_VLLM_TABLE")
    if target:
        doc = {
            "table": {s: [sum(o), len(o)] for s, o in settings.items()},
            "mismatches": {f"{s} / {c}": w for (s, c), (ok, w) in RESULTS.items() if not ok},
            "timings_s": TIMINGS,
        }
        Path(target).write_text(json.dumps(doc, indent=1), encoding="utf-8")
