"""PhaseAwareReorder: LlamaIndex's ``LongContextReorder`` call shape, the kit's order."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.postprocessor import LongContextReorder  # noqa: E402
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from llama_index.postprocessor.phaseaware import PhaseAwareReorder  # noqa: E402

from phaseaware.errors import InputError, PhaseawareError  # noqa: E402


def _nodes(scores: list[float | None]) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=f"note {i}", id_=f"n{i}"), score=s)
        for i, s in enumerate(scores)
    ]


def _texts(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.get_content() for n in nodes]


@pytest.mark.parametrize("n", range(1, 9))
def test_without_a_profile_it_is_llama_index_s_arrangement_with_the_top_node_last(n):
    nodes = _nodes([0.1 * ((7 * i) % 11) + 0.05 for i in range(n)])  # distinct scores
    snapshot = [(id(x), x.score, x.node.get_content()) for x in nodes]
    out = PhaseAwareReorder().postprocess_nodes(nodes, QueryBundle("q"))
    assert [(id(x), x.score, x.node.get_content()) for x in nodes] == snapshot  # unchanged
    assert sorted(map(id, out)) == sorted(map(id, nodes))  # the same objects, none dropped
    assert out[-1].score == max(x.score for x in nodes)
    # the real LongContextReorder: the same arrangement, mirrored when n is odd
    expected = LongContextReorder().postprocess_nodes(nodes, QueryBundle("q"))
    assert _texts(out) == _texts(expected if n % 2 == 0 else expected[::-1])


def test_it_is_a_node_postprocessor_sync_and_async():
    reorder = PhaseAwareReorder()
    assert isinstance(reorder, BaseNodePostprocessor)
    assert reorder.postprocess_nodes([]) == []
    nodes = _nodes([0.2, 0.9, 0.5])
    assert _texts(asyncio.run(reorder.apostprocess_nodes(nodes))) == _texts(
        reorder.postprocess_nodes(nodes)
    )
    assert PhaseAwareReorder.class_name() == "PhaseAwareReorder"


def test_a_node_without_a_score_ranks_after_every_scored_one():
    # LongContextReorder reads a missing score as 0; the kit's rule ranks it last of all
    out = PhaseAwareReorder().postprocess_nodes(_nodes([None, -0.5, 0.4]))
    assert _texts(out) == ["note 1", "note 0", "note 2"]


def test_with_a_profile_the_most_relevant_goes_last(reference_profile_path):
    nodes = _nodes([0.3, 0.9, 0.1, 0.7, 0.5])
    out = PhaseAwareReorder(profile=str(reference_profile_path)).postprocess_nodes(nodes)
    assert _texts(out) == ["note 2", "note 0", "note 4", "note 3", "note 1"]


def test_bad_input_is_a_typed_error():
    with pytest.raises(PhaseawareError, match="no-such-model"):
        PhaseAwareReorder(profile="no-such-model")
    with pytest.raises(InputError, match="NodeWithScore"):
        PhaseAwareReorder().postprocess_nodes(["plain text"])  # type: ignore[list-item]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_an_unusable_score_orders_like_a_missing_one(bad):
    """LongContextReorder never raises on a node's score (issue 38): NaN or inf orders as a
    missing score, with one warning naming the node."""
    from phaseaware.integrate import UnusableScoreWarning

    hostile = _nodes([0.3, 0.9, bad, 0.7])
    with pytest.warns(UnusableScoreWarning, match=r"nodes\[2\].*no finite number") as got:
        out = PhaseAwareReorder().postprocess_nodes(hostile)
    assert len(got) == 1
    expected = PhaseAwareReorder().postprocess_nodes(_nodes([0.3, 0.9, None, 0.7]))
    assert _texts(out) == _texts(expected)
