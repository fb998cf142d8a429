"""PhaseAwarePostprocessor, sync and async: new nodes, segments as text, report hidden."""

from __future__ import annotations

import asyncio
import copy
import warnings

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("transformers")

from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode  # noqa: E402
from llama_index.postprocessor.phaseaware import (  # noqa: E402
    ASSEMBLY_KEY,
    PLACEMENT_KEY,
    PhaseAwareNode,
    PhaseAwarePostprocessor,
    RepackWarning,
)

from phaseaware.tokenizers import load_tokenizer  # noqa: E402

QUESTION = "What is the access code for Priya ?"
MESSAGES = [{"role": "user", "content": "{context}\n\n{question}"}]
TEXTS = [
    "river waits near the old garden . The access code for Priya is 317 . A late tower rests .",
    "station fades . The access code for Hugo is 204 . One green lamp rests under every bridge .",
    "kitchen turns beside that open harbor . The access code for Mira is 550 .",
]


@pytest.fixture(scope="module")
def postprocessor(reference_profile_path) -> PhaseAwarePostprocessor:
    return PhaseAwarePostprocessor(
        tokenizer="reference",
        chat_format="hf",
        profile=str(reference_profile_path),
        budget_tokens=512,
        messages=MESSAGES,
    )


def _nodes(scores) -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=TextNode(
                text=t,
                id_=f"n{i}",
                metadata={"source": f"doc-{i}", "tags": ["a", "b"]},
                excluded_llm_metadata_keys=["source", "tags"],
            ),
            score=s,
        )
        for i, (t, s) in enumerate(zip(TEXTS, scores, strict=True))
    ]


def _run(pp, nodes, query, mode):
    bundle = QueryBundle(query) if query is not None else None
    if mode == "sync":
        return pp.postprocess_nodes(nodes, query_bundle=bundle)
    return asyncio.run(pp.apostprocess_nodes(nodes, query_bundle=bundle))


MODES = ["sync", "async"]


@pytest.mark.parametrize("mode", MODES)
def test_empty_input_gives_empty_output(postprocessor, mode):
    assert _run(postprocessor, [], QUESTION, mode) == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scores", [[0.9, 0.5, 0.7], [None, None, None], [0.4, None, 0.8]])
def test_segments_are_the_prompt_and_inputs_are_untouched(postprocessor, mode, scores):
    nodes = _nodes(scores)
    before = [copy.deepcopy(n.model_dump()) for n in nodes]
    out = _run(postprocessor, nodes, QUESTION, mode)
    assert [n.model_dump() for n in nodes] == before  # nothing mutated
    assert {n.node.node_id for n in out} == {"n0", "n1", "n2"}
    assembly = out[0].node.metadata[ASSEMBLY_KEY]
    prompt = assembly["prompt"]
    tok = load_tokenizer("reference")
    measured = tok.tokenize(prompt)
    assert len(measured) == assembly["token_count"]
    for order, n in enumerate(out):
        assert isinstance(n.node, PhaseAwareNode) and n.node is not nodes[0].node
        placement = n.node.metadata[PLACEMENT_KEY]
        assert placement["order"] == order
        assert n.node.text == prompt[placement["segment_char_start"] : placement["char_end"]]
        assert n.node.text.endswith(TEXTS[int(n.node.node_id[1])])
        # Every reported key token is where the re-tokenized prompt puts it.
        for pos, char in zip(
            placement["key_token_positions"], placement["key_char_offsets"], strict=True
        ):
            assert measured.token_at_char(char) == pos
        original = next(o for o in nodes if o.node.node_id == n.node.node_id)
        assert n.score == original.score  # None stays None


@pytest.mark.parametrize("mode", MODES)
def test_metadata_kept_and_report_hidden_from_llm_and_embedding(postprocessor, mode):
    nodes = _nodes([0.9, 0.5, 0.7])
    out = _run(postprocessor, nodes, QUESTION, mode)
    for n in out:
        i = int(n.node.node_id[1])
        assert n.node.metadata["source"] == f"doc-{i}"
        assert n.node.metadata["tags"] == ["a", "b"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RepackWarning)
            llm_view = n.node.get_content(metadata_mode=MetadataMode.LLM)
        assert llm_view == n.node.text  # nothing but the segment reaches the LLM
        embed_view = n.node.get_content(metadata_mode=MetadataMode.EMBED)
        assert "phaseaware" not in embed_view and TEXTS[i] in embed_view
        assert f"source: doc-{i}" in embed_view  # the caller's embed view is kept
        assert PLACEMENT_KEY in n.node.excluded_llm_metadata_keys
        assert ASSEMBLY_KEY in n.node.excluded_embed_metadata_keys


def test_visible_metadata_header_is_part_of_the_planned_text(postprocessor):
    node = NodeWithScore(
        node=TextNode(text=TEXTS[0], id_="x", metadata={"file": "a.txt"}), score=1.0
    )
    (out,) = postprocessor.postprocess_nodes([node], query_str=QUESTION)
    assert out.node.text.endswith("file: a.txt\n\n" + TEXTS[0])  # what LlamaIndex shows the LLM
    assert node.node.text == TEXTS[0]


@pytest.mark.parametrize("mode", MODES)
def test_missing_query_still_arranges(postprocessor, mode):
    out = _run(postprocessor, _nodes([0.9, 0.5, 0.7]), None, mode)
    assert len(out) == 3
    assert out[0].node.metadata[ASSEMBLY_KEY]["messages"][0]["content"].endswith("\n\n")


def test_llm_view_read_warns_naming_the_synthesizer(postprocessor):
    (out, *_) = postprocessor.postprocess_nodes(_nodes([0.9, 0.5, 0.7]), query_str=QUESTION)
    with pytest.warns(RepackWarning, match="PhaseAwareSynthesizer"):
        out.node.get_content(metadata_mode=MetadataMode.LLM)


def test_bad_options_name_the_fix():
    from phaseaware.errors import InputError

    with pytest.raises(InputError, match="known options"):
        PhaseAwarePostprocessor(
            tokenizer="reference", chat_format="hf", budget_tokens=512, options={"padd": True}
        )


def test_none_and_ill_typed_nodes_and_scores_are_input_errors(postprocessor):
    from phaseaware.errors import InputError

    bad_score = NodeWithScore.model_construct(node=TextNode(text=TEXTS[0], id_="n0"), score="hi")
    cases = [
        ([bad_score], r"nodes\[0\] has score 'hi'"),
        ([_nodes([0.9, 0.5, 0.7])[0], None], r"nodes\[1\] is a NoneType"),
        ([NodeWithScore.model_construct(node=None, score=1.0)], r"nodes\[0\] is a NodeWithScore"),
    ]
    for nodes, match in cases:
        with pytest.raises(InputError, match=match):
            postprocessor.postprocess_nodes(nodes, query_str=QUESTION)
