"""Endpoint records end to end: probe a loopback server, then run the adapter with the record.

The server (``tests/support/endpoint_server.py`` on uvicorn) adds a BOS and a hidden
preamble whose length is drawn inside its closure, so this test learns the offset
only from ``probe_endpoint``; it then confirms from the server's own tokenization
that every key token sits at prompt index + the record's offset.
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_openai import ChatOpenAI
from langchain_phaseaware import PhaseAwarePrompt, PhaseAwareUsageCheck

from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.endpoints import UsageCheck, probe_endpoint
from phaseaware.tokenizers import load_tokenizer

endpoint_server = pytest.importorskip("tests.support.endpoint_server")

QUESTION = "Below which voltage is a Helios-3 module disabled?"
TEMPLATE = ChatPromptTemplate.from_messages(
    [("system", "Answer from the notes.\n{context}"), ("human", "{question}")]
)


def test_probed_record_plans_at_the_servers_positions(tmp_path: Path) -> None:
    tok = load_tokenizer("tiktoken:o200k_base")
    n = random.SystemRandom().randint(1, 9)
    server, app = endpoint_server.start_endpoint(
        tokenizer=tok, chat_format="chatml", extra_bos=True,
        hidden_prefix=lambda _i: "System preamble:" + " ." * n,
    )  # fmt: skip
    with server:
        record = probe_endpoint(
            base_url=server.base_url, model="sim-model", tokenizer=tok, chat_format="chatml",
            directory=tmp_path,
        )  # fmt: skip
        assert record.stability == "constant" and record.offset > 1  # BOS + the preamble
        prompt = PhaseAwarePrompt(
            TEMPLATE, tokenizer=tok, chat_format="chatml", profile="deepseek-v4-flash-base",
            budget_tokens=2000, options=AssemblyOptions(allow_tokenizer_mismatch=True),
            endpoint=record,
        )  # fmt: skip
        seen: list[UsageCheck] = []
        check = PhaseAwareUsageCheck(
            tokenizer=tok, chat_format="chatml", endpoint=record, on_mismatch="raise",
            on_check=seen.append,
        )  # fmt: skip
        model = ChatOpenAI(
            base_url=server.base_url, api_key="unused", model="sim-model", max_retries=0
        )
        docs = [
            Document(
                page_content=f"Note {i}: the Helios-{i} module is disabled below 3.{i}2 volts.",
                metadata={"evidence": f"3.{i}2 volts"},
                id=f"kb-{i}",
            )
            for i in range(5)
        ]
        inputs = {"question": QUESTION, "documents": docs}
        placed = prompt.place(inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            reply = (prompt | model).invoke(inputs, config={"callbacks": [check]})
        assert reply.content == "ok"
    (usage,) = seen
    assert usage.ok and usage.drift == 0
    served = app.log[-1]
    report = placed.report()
    assert served.text is not None and served.text.endswith(report["prompt"])
    assert len(served.ids) == report["token_count"] + record.offset
    ours = tok.encode(report["prompt"])
    positions = [pos for p in report["placements"] for pos in p["key_token_positions"]]
    assert positions
    for pos in positions:
        assert served.ids[pos + record.offset] == ours[pos]  # the model's position
