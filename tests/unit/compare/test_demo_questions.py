"""The demo's held-out RAG questions and the LongContextReorder arrangement."""

from __future__ import annotations

from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.calibration import task
from phaseaware.compare.arrange import long_context_reorder
from phaseaware.demo.rag_questions import make_questions


def test_long_context_reorder_matches_langchain_semantics() -> None:
    # LangChain's LongContextReorder on best-first [1..5] gives [1, 3, 5, 4, 2]:
    # the most relevant at the ends, the least relevant in the middle.
    chunks = [Chunk(text=f"t{i}", id=str(i)) for i in range(1, 6)]
    assert [c.id for c in long_context_reorder(chunks)] == ["1", "3", "5", "4", "2"]
    assert [c.id for c in chunks] == ["1", "2", "3", "4", "5"]  # input untouched


def test_questions_are_deterministic_and_hold_their_evidence() -> None:
    first = make_questions(count=20, seed=3, chunks_per_question=5)
    assert first == make_questions(count=20, seed=3, chunks_per_question=5)
    for q in first:
        assert len(q.chunks) == 5
        scores = [c.score for c in q.chunks]
        assert scores == sorted(scores, reverse=True)  # retrieval order
        holders = [c for c in q.chunks if task.record_text(q.key_name, q.answer) in c.text]
        assert [c.id for c in holders] == [q.evidence_chunk_id]
        assert q.question == task.question_text(q.key_name)
        vocab = set(task.vocabulary())
        assert all(word in vocab for c in q.chunks for word in c.text.split())


def test_chunks_start_mid_sentence_so_key_residues_are_spread() -> None:
    # with a word-level tokenizer (one word = one token) the key's offset in a
    # chunk is the word count before the name; its residue mod 8 must take
    # every value about equally often
    questions = make_questions(count=800, seed=5, chunks_per_question=3, max_filler_sentences=4)
    counts = [0] * 8
    for q in questions:
        for chunk in q.chunks:
            words = chunk.text.split()
            name_at = next(i for i, w in enumerate(words) if w in task.NAMES)
            counts[name_at % 8] += 1
    expected = sum(counts) / 8
    assert all(abs(c - expected) < 0.2 * expected for c in counts), counts
