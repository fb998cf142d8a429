"""Endpoint records end to end: probe a loopback server, then query through the record.

The server (``tests/support/endpoint_server.py`` on uvicorn) adds a BOS and a hidden
preamble whose length is drawn inside its closure; the offset is learned only from
``probe_endpoint``. The query engine then plans with the record, the usage check
passes, and the server's own tokens confirm each key token's position.
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from llama_index.core import PromptTemplate  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402
from llama_index.postprocessor.phaseaware import phaseaware_query_engine  # noqa: E402

from phaseaware.endpoints import probe_endpoint  # noqa: E402
from phaseaware.tokenizers import load_tokenizer  # noqa: E402

endpoint_server = pytest.importorskip("tests.support.endpoint_server")

QUESTION = "What is the access code for Priya ?"
TEXTS = [
    "river waits . The access code for Priya is 317 . A late tower rests .",
    "station fades . The access code for Hugo is 204 . One green lamp rests .",
    "lamp glows . The access code for Mina is 581 . A quiet field rests .",
]


class Fixed(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 - i / 10)
            for i, t in enumerate(TEXTS)
        ]


def test_probed_record_plans_at_the_servers_positions(
    tmp_path: Path, reference_profile_path: Path
) -> None:
    tok = load_tokenizer("reference")
    n = random.SystemRandom().randint(1, 9)
    server, app = endpoint_server.start_endpoint(
        tokenizer=tok, chat_format="hf", extra_bos=True,
        hidden_prefix=lambda _i: "preamble" + " ." * n,
    )  # fmt: skip
    with server:
        record = probe_endpoint(
            base_url=server.base_url, model="sim-model", tokenizer=tok, chat_format="hf",
            directory=tmp_path,
        )  # fmt: skip
        assert record.stability == "constant" and record.offset > 1  # BOS + the preamble
        llm = OpenAILike(
            model="sim-model", api_base=server.base_url, api_key="x", is_chat_model=True,
            max_tokens=1, max_retries=0, timeout=60,
        )  # fmt: skip
        engine = phaseaware_query_engine(
            Fixed(), llm=llm, tokenizer=tok, chat_format="hf", profile=reference_profile_path,
            budget_tokens=512, text_qa_template=PromptTemplate("{context_str}\n\n{query_str}"),
            endpoint=record, on_mismatch="raise",
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            response = engine.query(QUESTION)
    sent = response.metadata["phaseaware"]
    assert not sent.replanned and sent.position_offset == record.offset
    assert sent.check is not None and sent.check.ok and sent.check.drift == 0
    served = app.log[-1]
    assert len(served.ids) == sent.token_count + record.offset
    ours = tok.encode(sent.prompt)
    positions = [
        pos
        for node in response.source_nodes
        for pos in node.node.metadata["phaseaware_placement"]["key_token_positions"]
    ]
    assert positions
    for pos in positions:
        assert served.ids[pos + record.offset] == ours[pos]  # the model's position
