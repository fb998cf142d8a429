"""gkamradt/LLMTest_NeedleInAHaystack results: ``results/<name>_results.json``.

Fields, as the harness writes them (``needlehaystack/llm_needle_haystack_tester.py``,
``evaluate_and_log``): one JSON object per test, ``model``, ``context_length``
(the target length in tokens, not a count of the prompt sent), ``depth_percent``,
``version``, ``needle`` (the inserted sentence), ``model_response``, ``score``
(the evaluator's grade, 1-10 from the LLM judge) and, with ``save_contexts``,
``file_name``: the context is saved as ``contexts/<file_name>_context.txt``.

The prompt is rebuilt as the harness's OpenAI provider sends it
(``needlehaystack/providers/openai.py``, ``generate_prompt``): a system message
(:data:`SYSTEM`), the context as a user message, and the retrieval question
(``--question``, default the harness's own) with the provider's suffix as a
second user message; it is rendered with ``--chat-format`` or by ``--server``.
Everything before the needle (system message and context) is exact, so its
position is; the prompt length depends on the question. The needle is the
``needle`` sentence without its surrounding newlines; correct at ``score >=
--pass-at`` (default 10, the judge's full mark). ``--contexts`` names the
context folder (default: ``contexts`` beside the results folder).

Multi-needle runs (``needlehaystack/llm_multi_needle_haystack_tester.py``,
``LLMMultiNeedleHaystackTester.insert_needles``) insert every entry of ``needles`` but log the
tester's single default ``needle`` (``evaluate_and_log``), which is not in the context. The
needles scored are the record's ``needles`` when it has them (the LangSmith evaluator's
record), else ``needle`` when the context holds it, else the harness's default ``needles``
(``needlehaystack/run.py``, ``CommandArgs.needles``) found in the context: each is one
sample, scored on its own key, with the record's one grade (the judge grades the reply).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from phaseaware.scoring.errors import EvalLogError
from phaseaware.scoring.formats.bounded import read_context
from phaseaware.scoring.formats.common import (
    DOCUMENT_FLAG,
    ReadOptions,
    files_in,
    read_json,
    sample_from,
)
from phaseaware.scoring.sample import EvalSample, Skip

__all__ = ["read", "SYSTEM", "QUESTION", "QUESTION_SUFFIX", "PASS_AT", "MULTI_NEEDLES"]

SYSTEM = (
    "You are a helpful AI bot that answers questions for a user. Keep your response short "
    "and direct"
)
QUESTION = "What is the best thing to do in San Francisco?"
QUESTION_SUFFIX = " Don't give information outside the document or repeat your findings"
PASS_AT = 10.0
#: the multi-needle tester's default needles (run.py, ``CommandArgs.needles``)
MULTI_NEEDLES = (
    " Figs are one of the secret ingredients needed to build the perfect pizza. ",
    " Prosciutto is one of the secret ingredients needed to build the perfect pizza. ",
    " Goat cheese is one of the secret ingredients needed to build the perfect pizza. ",
)


def _needles(record: Mapping[str, Any], context: str) -> list[Any]:
    """The needles inserted into ``context`` (see the module docstring); each as logged."""
    listed = record.get("needles")
    if isinstance(listed, list) and listed:
        return listed
    needle = record.get("needle")
    if isinstance(needle, str) and needle.strip() and needle.strip() in context:
        return [needle]
    found = [n for n in MULTI_NEEDLES if n.strip() in context]
    return found or [needle]


def _contexts(path: Path, options: ReadOptions) -> Path:
    if options.contexts is not None:
        return options.contexts
    results = path if path.is_dir() else path.parent
    return results.parent / "contexts"


def read(path: Path, options: ReadOptions) -> Iterator[EvalSample | Skip]:
    contexts = _contexts(path, options)
    if not contexts.is_dir():
        raise EvalLogError(
            f"NIAH context folder {contexts} does not exist; pass --contexts (the harness "
            "saves contexts with save_contexts=True)"
        )
    question = (options.question or QUESTION) + QUESTION_SUFFIX
    for file in files_in(path, "*_results.json"):
        record = read_json(file, cap=options.document_cap())
        if not isinstance(record, Mapping):
            yield Skip(file.name, "bad-record", "not a JSON object")
            continue
        name = record.get("file_name")
        if name is None:
            yield Skip(file.name, "no-prompt", "no file_name: the run did not save its contexts")
            continue
        try:  # file_name is the log's word: a regular file inside --contexts, capped, UTF-8
            context = read_context(contexts, name, cap=options.document_cap(), flag=DOCUMENT_FLAG)
        except EvalLogError as exc:
            yield Skip(file.name, "no-prompt", str(exc))
            continue
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": context},
            {"role": "user", "content": question},
        ]
        needles = _needles(record, context) if options.needle_field is None else [None]
        for k, needle in enumerate(needles):
            one = record
            if options.needle_field is None:
                one = {**record, "needle": needle.strip() if isinstance(needle, str) else needle}
            yield sample_from(
                one,
                sample_id=file.name if len(needles) == 1 else f"{file.name}#needle {k}",
                prompt=messages,
                needle_field=options.needle_field or "needle",
                correct_field=options.correct_field or "score",
                pass_at=PASS_AT if options.pass_at is None else options.pass_at,
            )
