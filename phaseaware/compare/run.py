"""Run every question under every arrangement through a calibration backend, durably.

For each pending (question, arrangement) the prompt is assembled at the run's
token budget (:class:`~phaseaware.compare.arrange.Arranger`), sent through the
backend (``phaseaware.calibration.backends``: an OpenAI-compatible server, a
local transformers model or a Python callable) and the answer is logged
(:mod:`phaseaware.compare.log`) before the next is. ``questions_per_group``
questions' prompts go to the backend at once (a group); the OpenAI backend
keeps at most its ``concurrency`` requests in flight. Running the same
comparison again resumes from the log: nothing answered is asked twice.

Which arrangements run is not part of a comparison's identity: a log answered
under some arrangements (or a log written before the controls existed) resumes,
and only the arrangements it lacks are asked.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from phaseaware.assembly import AssemblyResult
from phaseaware.calibration.backends.base import Backend, ProbeRequest
from phaseaware.compare.arrange import ARRANGEMENTS, Arranger
from phaseaware.compare.log import (
    AnswerRecord,
    CompareHeader,
    fingerprint,
    open_compare_log,
)
from phaseaware.compare.mismatch import profile_mismatches
from phaseaware.compare.questions import CompareQuestion, questions_digest
from phaseaware.errors import BackendError, InputError
from phaseaware.serialize import to_plain
from phaseaware.version import __version__

__all__ = ["CompareSettings", "CompareRun", "ProgressFn", "comparison_settings", "run_compare"]

ProgressFn = Callable[[int, int, AnswerRecord | None], None]


@dataclass(frozen=True)
class CompareSettings:
    """``budget_tokens``: prompt tokens every arrangement may use (template included);
    ``max_tokens``: tokens generated per answer; ``repeat``: the phase-aware arrangement
    (and the placebo) restates the top evidence before the question;
    ``questions_per_group``: questions sent to the backend together; ``arrangements``:
    which to run (all, the controls included, by default)."""

    budget_tokens: int
    max_tokens: int = 64
    repeat: bool = False
    questions_per_group: int = 4
    arrangements: tuple[str, ...] = ARRANGEMENTS

    def __post_init__(self) -> None:
        if self.budget_tokens < 1 or self.max_tokens < 1 or self.questions_per_group < 1:
            raise InputError(
                "budget_tokens, max_tokens and questions_per_group must be >= 1 "
                f"(got {self.budget_tokens}, {self.max_tokens}, {self.questions_per_group})"
            )
        unknown = [a for a in self.arrangements if a not in ARRANGEMENTS]
        if (
            not self.arrangements
            or unknown
            or len(set(self.arrangements)) != len(self.arrangements)
        ):
            raise InputError(
                f"arrangements must be distinct names of {', '.join(ARRANGEMENTS)} "
                f"(got {', '.join(map(repr, self.arrangements)) or 'none'})"
            )


@dataclass(frozen=True)
class CompareRun:
    """The answers of a comparison (one record per question and arrangement, log order),
    ``n_requests`` sent by this run and ``n_skipped`` found in the log already;
    ``warnings``: how the profile's measurement differs from this run
    (:func:`~phaseaware.compare.mismatch.profile_mismatches`)."""

    records: tuple[AnswerRecord, ...]
    n_requests: int
    n_skipped: int
    settings: dict[str, Any]
    log_path: str
    warnings: tuple[str, ...] = ()


def _digest(value: object) -> str:
    canonical = json.dumps(to_plain(value), sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _record(
    arranger: Arranger,
    question: CompareQuestion,
    arrangement: str,
    result: AssemblyResult,
    text: str,
    **extra: Any,
) -> AnswerRecord:
    top = question.top_evidence_id
    evidence = [p for p in result.placements if p.chunk_id == top]
    residue = evidence[0].residues[0] if evidence and evidence[0].residues else None
    expected = arranger.predicted_accuracy(result, top) if top is not None else None
    return AnswerRecord(
        question_id=question.id,
        arrangement=arrangement,
        completion=text,
        prompt_tokens=result.token_count,
        padding_tokens=result.padding_tokens,
        repeated_tokens=result.repeated_tokens,
        context_tokens=sum(p.token_end - p.token_start for p in result.placements),
        dropped=len(result.dropped),
        evidence_residue=residue,
        expected_accuracy=expected,
        **extra,
    )


def comparison_settings(
    *,
    questions: Sequence[CompareQuestion],
    arranger: Arranger,
    settings: CompareSettings,
    model: str,
    chat_format: str,
    backend: str,
) -> dict[str, Any]:
    """What identifies a comparison (its log header's settings; ``fingerprint`` of it is the
    run's fingerprint): the questions, tokenizer, chat format, profile, budget, model, backend.
    Not the arrangements: each answer's line names its own, so a log resumes under more."""
    if not questions:
        raise InputError("no question to compare; pass a JSONL file with at least one line")
    return {
        "questions": questions_digest(questions),
        "n_questions": len(questions),
        "tokenizer": arranger.tokenizer.fingerprint(),
        "tokenizer_spec": arranger.tokenizer.spec,
        "chat_format": chat_format,
        "profile": _digest(arranger.profile),
        "profile_model": arranger.profile.model,
        "period": arranger.profile.period,
        "budget_tokens": settings.budget_tokens,
        "max_tokens": settings.max_tokens,
        "repeat": settings.repeat,
        "position_offset": arranger.position_offset,
        "model": model,
        "backend": backend,
    }


def run_compare(
    *,
    questions: Sequence[CompareQuestion],
    backend: Backend,
    arranger: Arranger,
    settings: CompareSettings,
    model: str,
    chat_format: str,
    log_path: str | os.PathLike[str],
    fresh: bool = False,
    progress: ProgressFn | None = None,
) -> CompareRun:
    """Answer every pending (question, arrangement) and return every logged answer."""
    doc = comparison_settings(
        questions=questions,
        arranger=arranger,
        settings=settings,
        model=model,
        chat_format=chat_format,
        backend=backend.name,
    )
    header = CompareHeader(
        fingerprint=fingerprint(doc),
        settings=doc,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        tool_version=__version__,
    )
    total = len(questions) * len(settings.arrangements)
    n_requests = 0
    with open_compare_log(log_path, header, fresh=fresh) as log:
        n_skipped = len(log.done)
        if progress:
            progress(n_skipped, total, None)
        step = settings.questions_per_group
        for start in range(0, len(questions), step):
            group = _group(questions[start : start + step], settings, arranger, log.done)
            if not group:
                continue
            requests = [req for req, _, _, _ in group.values()]
            last = time.perf_counter()
            for completion in backend.complete(requests):
                entry = group.pop(completion.probe_id, None)
                if entry is None:
                    raise BackendError(
                        f"backend {backend.name!r} returned an unknown or repeated request id "
                        f"{completion.probe_id!r}; fix the backend"
                    )
                _, question, arrangement, result = entry
                now = time.perf_counter()
                log.append(
                    _record(
                        arranger,
                        question,
                        arrangement,
                        result,
                        completion.text,
                        reported_prompt_tokens=completion.reported_prompt_tokens,
                        elapsed=round(now - last, 6),
                    )
                )
                last = now
                n_requests += 1
                if progress:
                    progress(len(log.done), total, None)
            if group:
                raise BackendError(
                    f"backend {backend.name!r} returned no answer for {len(group)} prompt(s); "
                    "run the same command again to retry them"
                )
        records = tuple(log.done.values())
    warnings = profile_mismatches(
        arranger.profile, model=model, tokenizer=arranger.tokenizer, chat_format=chat_format
    )
    return CompareRun(records, n_requests, n_skipped, doc, str(log_path), warnings)


def _group(
    questions: Sequence[CompareQuestion],
    settings: CompareSettings,
    arranger: Arranger,
    done: dict[tuple[str, str], AnswerRecord],
) -> dict[str, tuple[ProbeRequest, CompareQuestion, str, AssemblyResult]]:
    """The pending prompts of ``questions``, assembled, by request id."""
    group: dict[str, tuple[ProbeRequest, CompareQuestion, str, AssemblyResult]] = {}
    for question in questions:
        pending = [a for a in settings.arrangements if (question.id, a) not in done]
        if not pending:
            continue
        results = arranger.assemble_question(
            pending, chunks=question.chunks, question=question.question, system=question.system
        )
        for arrangement, result in results.items():
            request_id = f"{len(group)}:{arrangement}"
            request = ProbeRequest(
                probe_id=request_id,
                prompt=result.prompt,
                prompt_tokens=result.token_count,
                answer="",
                messages=result.messages,
                max_tokens=settings.max_tokens,
            )
            group[request_id] = (request, question, arrangement, result)
    return group
