"""The reference model served on 127.0.0.1 (real HTTP, uvicorn) behind a request log,
and LlamaIndex's own ``OpenAILike`` chat model pointed at it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("llama_index.llms.openai_like")

from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402


class ListRetriever(BaseRetriever):
    """Returns the given nodes, as retrieved for the question (the data set's retrieval)."""

    def __init__(self, nodes: Sequence[NodeWithScore]) -> None:
        super().__init__()
        self._nodes = list(nodes)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return list(self._nodes)


def nodes_of(chunks: Sequence[Any]) -> list[NodeWithScore]:
    """phaseaware demo chunks as LlamaIndex nodes (text, score, id; no evidence hint)."""
    return [NodeWithScore(node=TextNode(text=c.text, id_=c.id), score=c.score) for c in chunks]


@pytest.fixture(scope="session")
def retriever_for():
    """``retriever_for(chunks)``: a retriever returning those demo chunks as nodes."""
    return lambda chunks: ListRetriever(nodes_of(chunks))


@pytest.fixture(scope="session")
def nodes_for():
    """``nodes_for(chunks)``: demo chunks as scored LlamaIndex nodes."""
    return nodes_of


@pytest.fixture(scope="session")
def served() -> Iterator[Any]:
    import torch

    from phaseaware.reference.engine import ReferenceEngine
    from phaseaware.reference.load import load_reference
    from tests.support.fault_server import start_server

    torch.set_num_threads(1)
    model, tok = load_reference("cpu")
    engine = ReferenceEngine(model, tok)
    with start_server(engine, host="127.0.0.1", port=0) as server:
        yield server, engine


@pytest.fixture()
def llm(served):
    from llama_index.llms.openai_like import OpenAILike

    server, engine = served
    return OpenAILike(
        model=engine.model_name,
        api_base=server.base_url,
        api_key="x",
        is_chat_model=True,
        max_tokens=4,
        temperature=0.0,
        context_window=1024,
        max_retries=0,
        timeout=60,
    )
