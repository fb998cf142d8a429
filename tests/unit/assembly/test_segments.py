"""AssemblyResult.segments: each chunk's rendered text (pad included) and its char span."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware.assembly import AssemblyOptions, Chunk, assemble
from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR
from phaseaware.profiles.registry import get_profile

_WORDS = st.sampled_from(["alpha", "beta", "code", "vault", "7", "  ", "é", "北京", "'s", "\n"])


@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(st.lists(_WORDS, min_size=1, max_size=30).map(" ".join), min_size=1, max_size=6)
)
def test_segments_tile_the_context_and_slice_the_prompt(cl100k, texts: list[str]) -> None:
    chunks = [
        Chunk(text=t + " vault code 42.", score=1.0 - i / 10, id=f"c{i}")
        for i, t in enumerate(texts)
    ]
    result = assemble(
        chunks,
        tokenizer=cl100k,
        chat_format="chatml",
        question="Which vault code?",
        profile=get_profile("deepseek-v4-flash-base"),
        budget_tokens=4000,
        options=AssemblyOptions(allow_tokenizer_mismatch=True),
    )
    segments = result.segments
    assert [s.chunk_id for s in segments] == [p.chunk_id for p in result.placements]
    for seg, placement in zip(segments, result.placements, strict=True):
        assert result.prompt[seg.char_start : seg.char_end] == seg.text
        assert seg.text.endswith(next(c.text for c in chunks if c.id == seg.chunk_id))
        assert seg.padding_tokens == placement.padding_tokens
        assert (seg.char_start < placement.char_start) == (placement.padding_tokens > 0)
    assert result.context.startswith(CHUNK_SEPARATOR.join(s.text for s in segments))
