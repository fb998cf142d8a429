"""The shipped reference model, calibrated once and served over loopback HTTP.

``served`` is the real OpenAI-compatible server (uvicorn, 127.0.0.1, port 0) around a
:class:`RecordingEngine`: the reference engine, plus a log of every chat request as
the server received it (messages) and the token ids it fed the model.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("langchain_openai")

CALIBRATION_BASE_PROMPTS = 12


@dataclass(frozen=True)
class Received:
    messages: tuple[dict[str, str], ...]
    ids: tuple[int, ...]


@dataclass(frozen=True)
class Served:
    base_url: str
    model_name: str
    engine: Any
    log: list[Received]


def _recording_engine(model: Any, tok: Any) -> Any:
    from phaseaware.reference.engine import ReferenceEngine

    class RecordingEngine(ReferenceEngine):
        def __init__(self) -> None:
            super().__init__(model, tok)
            self.log: list[Received] = []
            self._log_lock = threading.Lock()

        def encode_chat(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
            ids = super().encode_chat(messages)
            with self._log_lock:
                self.log.append(Received(tuple(dict(m) for m in messages), tuple(ids)))
            return ids

    return RecordingEngine()


@pytest.fixture(scope="session")
def reference_profile(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A profile of the reference model measured now (same protocol as ``phaseaware demo``)."""
    from phaseaware.calibration.backends.hf import load_hf_backend
    from phaseaware.calibration.runner import calibrate
    from phaseaware.chat import conversation_layout
    from phaseaware.demo.run import DemoSettings
    from phaseaware.reference.load import reference_model_source
    from phaseaware.reference.paths import MODEL_NAME
    from phaseaware.tokenizers import load_tokenizer

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("calibration")
    tokenizer = load_tokenizer("reference")
    backend = load_hf_backend(reference_model_source(), tokenizer, threads=1)
    try:
        result = calibrate(
            backend=backend,
            tokenizer=tokenizer,
            layout=conversation_layout(tokenizer=tokenizer, chat_format="hf"),
            settings=DemoSettings(base_prompts=CALIBRATION_BASE_PROMPTS).probe_settings(),
            model=MODEL_NAME,
            chat_format="hf",
            log_path=out / "calibration.jsonl",
            period=8,
            out_path=out / f"{MODEL_NAME}.json",
        )
    finally:
        backend.close()
    return result.profile


@pytest.fixture(scope="session")
def served() -> Iterator[Served]:
    from phaseaware.reference.load import load_reference
    from phaseaware.reference.server import start_server

    torch.set_num_threads(1)
    model, tok = load_reference("cpu")
    engine = _recording_engine(model, tok)
    with start_server(engine, host="127.0.0.1", port=0) as server:
        yield Served(server.base_url, engine.model_name, engine, engine.log)


@pytest.fixture
def chat_model(served: Served) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=served.base_url,
        api_key="unused",
        model=served.model_name,
        temperature=0,
        max_tokens=4,
        max_retries=0,
        timeout=60,
    )
