"""Chunk input: normalization of Chunk objects and the request format (``Chunk.from_dict``)."""

from __future__ import annotations

import pytest

from phaseaware.assembly.inputs.chunks import Chunk, chunks_from_request, normalize_chunks
from phaseaware.errors import InputError


def test_normalize_chunks_ids_and_errors() -> None:
    original = [Chunk("a", score=1), Chunk("b", id="x"), "c"]
    out = normalize_chunks(original)
    assert [c.id for c in out] == ["chunk-0", "x", "chunk-2"]
    assert original[0].id is None  # not mutated
    with pytest.raises(InputError, match="empty"):
        normalize_chunks([])
    with pytest.raises(InputError, match="duplicate chunk id 'x'"):
        normalize_chunks([Chunk("a", id="x"), Chunk("b", id="x")])
    with pytest.raises(InputError, match="score"):
        normalize_chunks([Chunk("a", score=float("nan"))])


def test_from_dict_reads_the_request_format() -> None:
    chunk = Chunk.from_dict({"text": "t", "score": 2, "id": "a", "evidence": ["t"]}, where="x")
    assert chunk == Chunk(text="t", score=2.0, id="a", evidence=("t",))
    assert isinstance(chunk.score, float)
    assert Chunk.from_dict({"text": "t", "evidence": None}) == Chunk(text="t")


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("text", "req: chunks[0] must be an object with 'text'"),
        ({"id": "a"}, "req: chunks[0] is missing key 'text' (a string)"),
        ({"text": "t", "score": "high"}, "req: chunks[0].score must be a number"),
        ({"text": "t", "score": True}, "req: chunks[0].score must be a number"),
        ({"text": "t", "evidence": "t"}, "req: chunks[0].evidence must be a list of strings"),
        ({"text": "t", "evidence": [1]}, "req: chunks[0].evidence must hold non-empty strings"),
        ({"text": "t", "evidence": [""]}, "req: chunks[0].evidence must hold non-empty strings"),
        ({"text": "t", "id": 7}, "req: chunks[0].id must be a str"),
    ],
)
def test_chunks_from_request_names_the_bad_field(item, message) -> None:
    with pytest.raises(InputError) as info:
        chunks_from_request([item], source="req")
    assert str(info.value).startswith(message)
    with pytest.raises(InputError, match="key 'chunks' must be a list"):
        chunks_from_request({"text": "t"}, source="req")


def test_python_callers_get_the_same_field_rules() -> None:
    for chunk, message in (
        (Chunk("t", score="high"), "chunks[0].score must be a number"),  # type: ignore[arg-type]
        (Chunk("t", score=float("inf")), "chunks[0].score must be finite"),
        (Chunk("t", evidence=("",)), "chunks[0].evidence must hold non-empty strings"),
        (Chunk("t", id=7), "chunks[0].id must be a str"),  # type: ignore[arg-type]
    ):
        with pytest.raises(InputError) as info:
            normalize_chunks([chunk])
        assert str(info.value).startswith(message)
    assert normalize_chunks([Chunk("t", evidence="t")])[0].evidence == ("t",)  # type: ignore[arg-type]


def test_copies_under_one_chunk_id_merge_and_are_reported() -> None:
    from phaseaware import assemble
    from phaseaware.assembly.inputs.chunks import MergedDuplicate, normalize_merged
    from phaseaware.assembly.inputs.options import AssemblyOptions

    text = "The access code for Priya is 317 ."
    chunks = [
        Chunk(text, score=0.3, id="kb-1"),
        Chunk("Hugo likes tea .", score=0.5, id="kb-2"),
        Chunk(text, score=0.8, id="kb-1"),
    ]
    normalized = normalize_merged(chunks)
    assert [c.score for c in normalized.chunks] == [0.8, 0.5]  # the best copy, first place
    assert normalized.merged == (MergedDuplicate(chunk_id="kb-1", kept=2, merged=(0,)),)
    result = assemble(
        chunks, tokenizer="tiktoken:o200k_base", chat_format="chatml",
        question="What is the access code for Priya ?", budget_tokens=300,
        options=AssemblyOptions(repeat=False),
    )  # fmt: skip
    assert sorted(p.chunk_id for p in result.placements) == ["kb-1", "kb-2"]
    assert result.prompt.count(text) == 1
    assert result.merged_duplicates == normalized.merged
    assert result.to_dict()["merged_duplicates"] == [{"chunk_id": "kb-1", "kept": 2, "merged": [0]}]
    with pytest.raises(InputError, match="chunks\\[0\\] and chunks\\[1\\] share the chunk id 'x'"):
        normalize_merged([Chunk("a", id="x"), Chunk("b", id="x")])
    with pytest.raises(InputError, match="duplicate chunk id 'kb-1'"):
        assemble(
            chunks, tokenizer="tiktoken:o200k_base", chat_format="chatml", question="q",
            budget_tokens=300, options=AssemblyOptions(duplicate_ids="error"),
        )  # fmt: skip
    with pytest.raises(InputError, match="duplicate_ids"):
        AssemblyOptions(duplicate_ids="keep")
