"""A third-party tokenizer with only the base ``Tokenizer`` protocol assembles correctly.

It has no optional capability (batch, parallel batch, char index), so assembly
takes the generic path (``tokenize`` on one text); its placements must be the
ones a re-tokenization of the prompt confirms, and the same as the shipped
adapter's for the same vocabulary.
"""

from __future__ import annotations

from phaseaware.assembly import AssemblyOptions, Chunk, assemble
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import (
    BatchTokenizer,
    CharIndexTokenizer,
    ParallelBatchTokenizer,
    TokenizedText,
    Tokenizer,
)
from phaseaware.tokenizers.offsets import char_starts

QUESTION = "What is the launch code of Project Tamarind?"


class MinimalTokenizer:
    """Encode plus offsets, nothing else: what a framework adapter might wrap."""

    def __init__(self) -> None:
        # the vocabulary only: phaseaware's loader finds the local cl100k files
        self._enc = load_tokenizer("tiktoken:cl100k_base").encoding
        self.calls: list[str] = []

    @property
    def spec(self) -> str:
        return "third-party:cl100k"

    @property
    def bos_text(self) -> str:
        return ""

    def encode(self, text: str) -> list[int]:
        return self._enc.encode(text, allowed_special="all", disallowed_special=())

    def tokenize(self, text: str) -> TokenizedText:
        self.calls.append(text)
        ids = self.encode(text)
        lengths = [len(self._enc.decode_single_token_bytes(i)) for i in ids]
        return TokenizedText(text=text, ids=tuple(ids), starts=char_starts(text.encode(), lengths))

    def decode(self, ids: list[int]) -> str:
        return self._enc.decode(ids)

    def fingerprint(self) -> str:
        return "sha256:third-party-cl100k"


def chunks() -> list[Chunk]:
    out = []
    for i in range(5):
        filler = "Background material about unrelated logistics. " * (2 + 3 * i)
        out.append(
            Chunk(
                text=f"{filler}The launch code of Project Tamarind is {7000 + i}. {filler}",
                score=round(1.0 - i * 0.1, 2),
                id=f"doc-{i}",
            )
        )
    return out


def run(tokenizer: Tokenizer):
    return assemble(
        chunks(), tokenizer=tokenizer, chat_format="chatml", question=QUESTION,
        profile=get_profile("deepseek-v4-flash-base"), budget_tokens=3000,
        options=AssemblyOptions(allow_tokenizer_mismatch=True),
    )  # fmt: skip


def test_minimal_tokenizer_has_only_the_base_protocol() -> None:
    tok = MinimalTokenizer()
    assert isinstance(tok, Tokenizer)
    for capability in (BatchTokenizer, ParallelBatchTokenizer, CharIndexTokenizer):
        assert not isinstance(tok, capability)
    shipped = load_tokenizer("tiktoken:cl100k_base")
    assert isinstance(shipped, CharIndexTokenizer) and isinstance(shipped, ParallelBatchTokenizer)


def test_generic_path_placements_are_confirmed_by_retokenization() -> None:
    tok = MinimalTokenizer()
    result = run(tok)
    assert tok.calls  # chunks were measured through the base protocol's tokenize
    measured = tok.tokenize(result.prompt)
    assert len(measured) == result.token_count <= 3000
    assert result.placements and result.tokenizer == "third-party:cl100k"
    for p in result.placements:
        assert p.key_token_positions
        for t, c, r in zip(p.key_token_positions, p.key_char_offsets, p.residues, strict=True):
            assert measured.token_at_char(c) == t and t % 8 == r
            if result.token_count - t > 128:  # outside the raw window: off the weak residues
                assert r not in (3, 7)


def test_generic_path_equals_the_shipped_adapter() -> None:
    generic = run(MinimalTokenizer()).to_dict()
    shipped = run(load_tokenizer("tiktoken:cl100k_base")).to_dict()
    for doc in (generic, shipped):
        doc.pop("tokenizer"), doc.pop("fingerprint")
    assert generic == shipped
