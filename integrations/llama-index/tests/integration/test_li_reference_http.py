"""A LlamaIndex query engine talks to the reference model over real HTTP (loopback).

What the server received is re-rendered and re-tokenized by the server's own engine:
every evidence key token must sit where the placement report says. The default
``compact`` mode, given the same postprocessor, sends other text, and warns.
"""

from __future__ import annotations

import pytest
from llama_index.core import PromptTemplate
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.postprocessor.phaseaware import (
    ASSEMBLY_KEY,
    PLACEMENT_KEY,
    RepackWarning,
    phaseaware_query_engine,
)

from phaseaware.demo.rag_questions import make_questions
from phaseaware.tokenizers import load_tokenizer

pytestmark = pytest.mark.slow

QA = PromptTemplate("{context_str}\n\n{query_str}")  # the reference model's task shape


def _last_chat_body(server):
    chats = [r for r in server.request_log if r.path == "/v1/chat/completions"]
    return chats[-1].body


@pytest.fixture(scope="module")
def question():
    return make_questions(count=1, seed=4242, chunks_per_question=5, max_filler_sentences=8)[0]


def _engine(llm, question, profile, retriever_for):
    return phaseaware_query_engine(
        retriever_for(question.chunks),
        llm=llm,
        tokenizer="reference",
        chat_format="hf",
        profile=str(profile),
        budget_tokens=512,
        text_qa_template=QA,
        on_mismatch="raise",
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_every_key_token_lands_where_the_report_says(
    served, llm, question, reference_profile_path, retriever_for, mode
):
    import asyncio

    server, engine = served
    query_engine = _engine(llm, question, reference_profile_path, retriever_for)
    if mode == "sync":
        response = query_engine.query(question.question)
    else:
        response = asyncio.run(query_engine.aquery(question.question))
    sent = response.metadata["phaseaware"]
    assert sent is not None and not sent.replanned and sent.check is not None
    assert sent.check.ok and sent.check.reported_tokens == sent.token_count
    received = _last_chat_body(server)["messages"]
    assert received == [dict(m) for m in sent.messages]  # exactly the planned messages
    # Re-render and re-tokenize what the server got, with the server's own engine.
    rendered = engine.render_chat(received)
    server_ids = engine.encode_chat(received)
    assert rendered == sent.prompt
    measured = load_tokenizer("reference").tokenize(rendered)
    assert list(measured.ids) == server_ids
    keys = 0
    for n in response.source_nodes:
        placement = n.node.metadata[PLACEMENT_KEY]
        assert rendered[placement["segment_char_start"] : placement["char_end"]] == n.node.text
        for pos, char in zip(
            placement["key_token_positions"], placement["key_char_offsets"], strict=True
        ):
            assert measured.token_at_char(char) == pos
            start, end = measured.char_span(pos)
            assert start <= char < end  # that server token holds the key's first character
            keys += 1
        assert [(p + 0) % 8 for p in placement["key_token_positions"]] == placement["residues"]
    assert keys >= len(response.source_nodes)
    evidence = [n for n in response.source_nodes if n.node.node_id == question.evidence_chunk_id]
    assert evidence, "the evidence chunk was admitted"
    assert response.source_nodes[0].node.metadata[ASSEMBLY_KEY]["token_count"] == len(server_ids)


def _first_with_end_pad(postprocessor, nodes_for, questions):
    """The first question whose plan ends in an end pad (chosen from the plan alone)."""
    for q in questions:
        planned = postprocessor.postprocess_nodes(nodes_for(q.chunks), query_str=q.question)
        plan = planned[0].node.metadata[ASSEMBLY_KEY]
        context = "\n\n".join(n.node.text for n in planned) + "\n\n" + q.question
        if plan["messages"][0]["content"] != context:
            return q, planned, plan
    raise AssertionError("no plan with an end pad among the questions; add questions")


def test_compact_mode_breaks_the_alignment_and_warns(
    served, llm, reference_profile_path, retriever_for, nodes_for
):
    """compact strips and joins the node texts and drops what is not a node (the end pad
    that moves the prompt's length off bad residues and keys out of the raw window)."""
    server, engine = served
    questions = make_questions(count=40, seed=4242, chunks_per_question=5, max_filler_sentences=8)
    postprocessor = _engine(llm, questions[0], reference_profile_path, retriever_for)
    postprocessor = postprocessor._node_postprocessors[-1]
    question, planned, plan = _first_with_end_pad(postprocessor, nodes_for, questions)
    default = RetrieverQueryEngine.from_args(
        retriever_for(question.chunks),
        llm=llm,
        text_qa_template=QA,
        node_postprocessors=[postprocessor],
    )  # response_mode="compact", LlamaIndex's default
    with pytest.warns(RepackWarning, match="PhaseAwareSynthesizer"):
        default.query(question.question)
    received = _last_chat_body(server)["messages"]
    assert received != plan["messages"]
    server_tokens = len(engine.encode_chat(received))
    # The model saw another prompt than the one the report describes.
    assert server_tokens != plan["token_count"], (server_tokens, plan["token_count"])
    # Asked through PhaseAwareSynthesizer instead, the same nodes arrive as planned.
    aligned = _engine(llm, question, reference_profile_path, retriever_for)
    aligned.query(question.question)
    assert _last_chat_body(server)["messages"] == plan["messages"]


def test_completion_llm_gets_the_planned_prompt_verbatim(
    served, question, reference_profile_path, retriever_for
):
    """``OpenAILike(is_chat_model=False)``: the rendered prompt goes to /v1/completions as is
    (LlamaIndex would otherwise send ``"user: ..."`` text of its own)."""
    from llama_index.llms.openai_like import OpenAILike

    server, engine = served
    llm = OpenAILike(
        model=engine.model_name, api_base=server.base_url, api_key="x", is_chat_model=False,
        max_tokens=4, temperature=0.0, max_retries=0, timeout=60,
    )  # fmt: skip
    query_engine = _engine(llm, question, reference_profile_path, retriever_for)
    response = query_engine.query(question.question)
    sent = response.metadata["phaseaware"]
    body = [r for r in server.request_log if r.path == "/v1/completions"][-1].body
    assert body["prompt"] == sent.prompt
    assert sent.check is not None and sent.check.ok
    assert len(engine.encode_prompt(body["prompt"])) == sent.token_count
