"""Filler: a unit whose token count is exact in context, per tokenizer; pad tables."""

from __future__ import annotations

import pytest

from phaseaware.assembly.inputs.chunks import normalize_chunks
from phaseaware.assembly.plan.planner import NO_PAD
from phaseaware.assembly.prepare.filler import chunk_pad_tables, find_filler
from phaseaware.assembly.prepare.measure import measure_chunks
from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR, pad_block
from phaseaware.tokenizers import load_tokenizer


@pytest.mark.parametrize("spec", ["tiktoken:cl100k_base", "tiktoken:o200k_base", "deepseek-v4"])
def test_filler_is_exact_and_cached(spec) -> None:
    tok = load_tokenizer(spec)
    filler = find_filler(tok, period=8)
    assert filler.unit.strip() and find_filler(tok, period=8) is filler
    assert len(filler.chunk_pad.shifts) == 17
    before, after = "Some text." + CHUNK_SEPARATOR, "Next chunk"
    base = tok.encode(before + after)
    for k, shift in enumerate(filler.chunk_pad.shifts):
        padded = tok.encode(before + pad_block(filler.unit, k) + after)
        assert len(padded) - len(base) == shift
        assert padded[-len(tok.encode(after)) :] == tok.encode(after)


def test_chunk_pad_tables_remeasure_chunks_that_start_with_punctuation() -> None:
    tok = load_tokenizer("tiktoken:cl100k_base")
    filler = find_filler(tok, period=8)
    chunks = normalize_chunks(["Plain start.", "\n\nIndented start.", "   "])
    prepared = measure_chunks(chunks, tokenizer=tok, terms=(), max_keys=4)
    plain, indented, blank = chunk_pad_tables(tok, filler, prepared)
    assert plain is filler.chunk_pad and blank is filler.chunk_pad
    if indented is not NO_PAD:  # re-measured on its own text, every shift exact
        base = len(tok.encode(CHUNK_SEPARATOR + chunks[1].text))
        for k, shift in enumerate(indented.shifts):
            padded = CHUNK_SEPARATOR + pad_block(filler.unit, k) + chunks[1].text
            assert len(tok.encode(padded)) - base == shift
    assert chunk_pad_tables(tok, None, prepared) == (NO_PAD, NO_PAD, NO_PAD)
