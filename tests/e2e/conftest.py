"""Fixtures for the end-to-end tests that talk to ``phaseaware serve-reference``.

``served`` (one per test module): the shipped reference model on CPU (one torch thread,
the suite's rule on this shared machine), served by the real uvicorn server on a free
loopback port; it yields ``(server, engine)``, and ``engine.tokenizer`` is the model's own
Hugging Face tokenizer. A module that asks for it imports torch and transformers itself
(``pytest.importorskip``), so collection without them skips instead of failing here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Any, Any]]:
    import torch

    from phaseaware.reference.engine import ReferenceEngine
    from phaseaware.reference.load import load_reference
    from phaseaware.reference.server import start_server

    torch.set_num_threads(1)
    model, tok = load_reference("cpu")
    engine = ReferenceEngine(model, tok)
    with start_server(engine, host="127.0.0.1", port=0) as server:
        yield server, engine
