"""On the reference model, phase-aware beats LlamaIndex's default query engine.

Held-out questions (``phaseaware.demo.rag_questions``, a seed the profile's
calibration never saw); every engine gets the same retrieved nodes and the same
text-QA template, through ``OpenAILike`` over real HTTP. Baselines: the default
``compact`` engine, with and without ``LongContextReorder``. Accuracy is exact
match of the first number in the answer, with 95% Wilson intervals.
"""

from __future__ import annotations

import pytest
from llama_index.core import PromptTemplate
from llama_index.core.postprocessor import LongContextReorder
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.postprocessor.phaseaware import phaseaware_query_engine

from phaseaware.calibration import task
from phaseaware.demo.rag_questions import make_questions
from phaseaware.intervals import wilson_interval

pytestmark = [pytest.mark.slow, pytest.mark.needs_trained_reference]

QA = PromptTemplate("{context_str}\n\n{query_str}")
QUESTIONS = 60
SEED = 20_000  # the demo uses 10_000 + seed; calibration uses its own probes


def test_phase_aware_beats_default_llama_index_engines(
    llm, reference_profile_path, retriever_for
) -> None:
    questions = make_questions(
        count=QUESTIONS, seed=SEED, chunks_per_question=5, max_filler_sentences=8
    )
    engines = {
        "llama-index default (compact)": lambda r: RetrieverQueryEngine.from_args(
            r, llm=llm, text_qa_template=QA
        ),
        "default + LongContextReorder": lambda r: RetrieverQueryEngine.from_args(
            r, llm=llm, text_qa_template=QA, node_postprocessors=[LongContextReorder()]
        ),
        "phase-aware": lambda r: phaseaware_query_engine(
            r,
            llm=llm,
            tokenizer="reference",
            chat_format="hf",
            profile=str(reference_profile_path),
            budget_tokens=512,
            text_qa_template=QA,
            on_mismatch="raise",
        ),
    }
    correct = {}
    for name, build in engines.items():
        hits = 0
        for q in questions:
            answer = str(build(retriever_for(q.chunks)).query(q.question))
            hits += task.extract_answer(answer) == q.answer
        correct[name] = hits
    print(f"\n{QUESTIONS} held-out questions, reference model over HTTP (OpenAILike)")
    for name, hits in correct.items():
        low, high = wilson_interval(hits, QUESTIONS)
        print(f"{name:32s} {hits / QUESTIONS:6.1%}  95% CI {low:.1%}-{high:.1%}")
    phase = correct["phase-aware"]
    assert phase >= correct["llama-index default (compact)"] + 4, correct
    assert phase >= correct["default + LongContextReorder"] + 4, correct
