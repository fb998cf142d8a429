"""Answer RAG questions under several assembly strategies and score them.

Strategies share everything but the arrangement of the retrieved chunks:

- ``naive``: retrieval order (best score first), no padding;
- ``lost-in-the-middle``: LangChain's ``LongContextReorder`` arrangement
  (most relevant at the ends, least relevant in the middle), no padding;
- ``phase-aware``: phaseaware's planner with the calibrated profile (reorder
  plus padding onto reliable residues).

Accuracy is exact match of the first number in the model's answer; intervals
are 95% Wilson. Token counts are measured on the final prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from phaseaware.assembly import assemble
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.calibration import task
from phaseaware.demo.rag_questions import RagQuestion
from phaseaware.intervals import wilson_interval
from phaseaware.profiles.model import Profile
from phaseaware.templates import PromptLayout
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["StrategyResult", "long_context_reorder", "STRATEGIES", "evaluate_strategies"]

STRATEGIES: tuple[str, ...] = ("naive", "lost-in-the-middle", "phase-aware")


@dataclass(frozen=True)
class StrategyResult:
    """Accuracy of one strategy over all questions (accuracy as a fraction)."""

    strategy: str
    correct: int
    total: int
    ci_low: float
    ci_high: float
    mean_prompt_tokens: float
    padding_tokens: int
    repeated_tokens: int
    context_tokens: int
    expected_accuracy: float | None  # the planner's prediction from the profile

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    @property
    def padding_overhead(self) -> float:
        """Padding and repeated tokens as a fraction of context tokens."""
        extra = self.padding_tokens + self.repeated_tokens
        return extra / self.context_tokens if self.context_tokens else 0.0


def long_context_reorder(chunks: Sequence[Chunk]) -> list[Chunk]:
    """The ``LongContextReorder`` arrangement of chunks given best-first.

    Walks from least to most relevant, alternately prepending and appending,
    so the most relevant chunks sit at both ends and the least in the middle.
    """
    arranged: list[Chunk] = []
    for i, chunk in enumerate(reversed(chunks)):
        if i % 2 == 1:
            arranged.append(chunk)
        else:
            arranged.insert(0, chunk)
    return arranged


def _assemble_for(
    strategy: str,
    question: RagQuestion,
    *,
    tokenizer: Tokenizer,
    layout: PromptLayout,
    profile: Profile,
    budget_tokens: int,
) -> AssemblyResult:
    plain = AssemblyOptions(strategy="none", pad=False, repeat=False, length_pad=False)
    chunks: Sequence[Chunk] = question.chunks
    options = plain
    if strategy == "lost-in-the-middle":
        chunks = long_context_reorder(chunks)
    elif strategy == "phase-aware":
        options = replace(plain, strategy="reorder", pad=True, length_pad=True)
    elif strategy != "naive":
        raise ValueError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    return assemble(
        chunks,
        tokenizer=tokenizer,
        layout=layout,
        question=question.question,
        profile=profile,
        budget_tokens=budget_tokens,
        options=options,
    )


def evaluate_strategies(
    questions: Sequence[RagQuestion],
    *,
    answer: Callable[[str, int], str],
    tokenizer: Tokenizer,
    layout: PromptLayout,
    profile: Profile,
    budget_tokens: int,
    strategies: Sequence[str] = STRATEGIES,
) -> list[StrategyResult]:
    """Assemble every question under every strategy, ask ``answer(prompt, prompt_tokens)``, score.

    ``prompt_tokens`` is the assembled prompt's measured length, so the answerer
    need not tokenize it again.
    """
    results = []
    for strategy in strategies:
        correct = tokens = padding = repeated = context = 0
        expected: list[float] = []
        for q in questions:
            assembled = _assemble_for(
                strategy,
                q,
                tokenizer=tokenizer,
                layout=layout,
                profile=profile,
                budget_tokens=budget_tokens,
            )
            if assembled.dropped:
                reasons = "; ".join(f"{d.chunk_id}: {d.reason}" for d in assembled.dropped)
                raise ValueError(f"budget_tokens={budget_tokens} dropped chunks ({reasons})")
            correct += (
                task.extract_answer(answer(assembled.prompt, assembled.token_count)) == q.answer
            )
            tokens += assembled.token_count
            padding += assembled.padding_tokens
            repeated += assembled.repeated_tokens
            context += sum(p.token_end - p.token_start for p in assembled.placements)
            evidence = [p for p in assembled.placements if p.chunk_id == q.evidence_chunk_id]
            if evidence and evidence[0].expected_accuracy is not None:
                expected.append(evidence[0].expected_accuracy)
        low, high = wilson_interval(correct, len(questions))
        results.append(
            StrategyResult(
                strategy=strategy,
                correct=correct,
                total=len(questions),
                ci_low=low,
                ci_high=high,
                mean_prompt_tokens=tokens / len(questions),
                padding_tokens=padding,
                repeated_tokens=repeated,
                context_tokens=context,
                expected_accuracy=sum(expected) / len(expected) if expected else None,
            )
        )
    return results
