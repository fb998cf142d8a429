"""``PhaseAwarePrompt``: the exact path from retrieved ``Document`` objects to chat messages.

The caller's ``ChatPromptTemplate`` holds ``{context}`` once, in any message. Every
other variable is formatted by LangChain as usual; ``{context}`` becomes phaseaware's
context slot (the template is formatted with a random sentinel for ``context`` and
split there, so braces or the text ``{context}`` inside the caller's variables are
never read as placeholders). The messages are rendered by the model's chat format,
the documents are planned, padded and placed by :func:`phaseaware.assembly.assemble`,
and the final prompt is re-tokenized: every reported position is a measured one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import run_in_executor

from langchain_phaseaware.convert import (
    document_chunks,
    document_index,
    message_dict,
    message_text,
    resolve_target,
)
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.assembly.pipeline import assemble
from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.chat.errors import DuplicateSlotError, MissingSlotError
from phaseaware.chat.formats import ChatFormat
from phaseaware.chat.layout import ConversationLayout, PromptLayout
from phaseaware.chat.messages import ConversationTemplate, Message, Part, Placeholder, parse_message
from phaseaware.endpoints import EndpointRef
from phaseaware.errors import InputError
from phaseaware.profiles.model import Profile
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["PhaseAwarePrompt", "PhaseAwarePromptWithReport", "PlacedPrompt", "placement_report"]

CONTEXT_VARIABLE = "context"


@dataclass(frozen=True)
class PlacedPrompt:
    """One call's output: the messages, the assembly behind them and the documents."""

    value: ChatPromptValue
    result: AssemblyResult
    documents: tuple[Document, ...]

    def report(self) -> dict[str, Any]:
        return placement_report(self.result, self.documents)


def placement_report(result: AssemblyResult, documents: Sequence[Document]) -> dict[str, Any]:
    """``result.to_dict()`` plus, per placement, the input index and ``Document.id``.

    Token positions are prompt token indices (BOS = 0); residues are taken at
    index + ``position_offset``. Planned over an offset set (``options.offsets``, or a
    varying endpoint record), no single residue is known: each placement's
    ``residues`` is ``None`` and ``report["robust"]`` holds the per-offset claims
    (``worst_case_accuracy``, ``covered``, ``extra_tokens``).
    """
    report = result.to_dict()
    for placement in report["placements"]:
        index = document_index(placement["chunk_id"])
        placement["document_index"] = index
        placement["document_id"] = documents[index].id
        if result.robust is not None:
            placement["residues"] = None  # unknown: the offset is one of a set
    return report


class PhaseAwarePrompt(Runnable[dict[str, Any], ChatPromptValue]):
    """A prompt step that places retrieved documents where the model reads them reliably.

    ``PhaseAwarePrompt(prompt, *, tokenizer, chat_format, profile, budget_tokens,
    options=None)``: ``prompt`` is a ``ChatPromptTemplate`` holding ``{context}``
    once (system or human message); ``tokenizer`` a phaseaware spec or object;
    ``chat_format`` ``deepseek-v4``, ``chatml``, ``hf`` or ``none`` (how the
    server renders messages: exactness needs the same format here); ``profile``
    a model name, profile path, ``Profile`` or ``None``; ``budget_tokens`` the
    most tokens of the whole prompt (template and BOS included).

    Input: a dict with ``question`` (str), ``documents`` (list of ``Document``)
    and the template's other variables. Output: a ``ChatPromptValue`` whose
    messages, rendered by ``chat_format``, are exactly the verified prompt.
    Scores come from ``metadata["score"]`` or ``metadata["relevance_score"]``
    (``score_keys``), else retrieval order; evidence strings from
    ``metadata["evidence"]`` (``evidence_key``), else the question's key terms.
    ``position_offset``: tokens the server adds before the prompt (e.g. 1 for a
    BOS the prompt text lacks); residues are taken at the model's positions.
    ``endpoint``: what ``phaseaware probe-endpoint`` learned (an ``EndpointRecord``,
    a record path or ``{"base_url", "model"}``): its offset, or for a varying
    endpoint its offset set (robust placement); a record probed with another
    tokenizer raises ``FingerprintMismatchError``, an explicit offset that
    disagrees with it ``InputError``.

    Empty ``documents`` give the template with an empty context. Raises
    ``MissingSlotError``/``DuplicateSlotError`` (no or several ``{context}``)
    and ``InputError`` (missing variables, bad documents) from ``phaseaware``.

    Async: assembly is CPU-bound (tokenizer calls and integer planning, no I/O),
    so ``ainvoke``/``abatch`` run it in LangChain's default thread-pool executor
    (``run_in_executor``): the event loop stays free, and ``abatch`` assembles
    its inputs concurrently in worker threads (bounded by ``max_concurrency``).
    """

    def __init__(
        self,
        prompt: ChatPromptTemplate,
        *,
        tokenizer: str | Tokenizer,
        chat_format: str | ChatFormat,
        profile: str | Path | Profile | None,
        budget_tokens: int,
        options: AssemblyOptions | Mapping[str, Any] | None = None,
        position_offset: int | None = None,
        endpoint: EndpointRef = None,
        thinking: bool = False,
        question_key: str = "question",
        documents_key: str = "documents",
        score_keys: Sequence[str] = ("score", "relevance_score"),
        evidence_key: str | None = "evidence",
    ) -> None:
        if not isinstance(prompt, ChatPromptTemplate):
            raise InputError(
                f"prompt must be a langchain ChatPromptTemplate, got {type(prompt).__name__}; "
                "build one with ChatPromptTemplate.from_messages([...])"
            )
        if CONTEXT_VARIABLE not in prompt.input_variables:
            raise MissingSlotError(
                f"the prompt template has no {{context}} variable (its variables: "
                f"{sorted(prompt.input_variables)}); put {{context}} where the retrieved "
                "documents go, in a system or human message"
            )
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
            raise InputError(f"budget_tokens must be an integer, got {budget_tokens!r}")
        self.prompt = prompt
        self.tokenizer, self.chat_format, self.profile, self.endpoint, self.options = (
            resolve_target(
                tokenizer=tokenizer,
                chat_format=chat_format,
                thinking=thinking,
                profile=profile,
                endpoint=endpoint,
                options=options,
                position_offset=position_offset,
            )
        )
        self.budget_tokens = budget_tokens
        self.question_key = question_key
        self.documents_key = documents_key
        self.score_keys = tuple(score_keys)
        self.evidence_key = evidence_key

    @property
    def InputType(self) -> type[dict[str, Any]]:  # noqa: N802 (LangChain's name)
        return dict

    @property
    def OutputType(self) -> type[ChatPromptValue]:  # noqa: N802
        return ChatPromptValue

    @property
    def position_offset(self) -> int:
        return self.options.position_offset

    # -- the one assembly ------------------------------------------------------------------

    def _variables(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(inputs, Mapping):
            raise InputError(
                f"PhaseAwarePrompt takes a dict with {self.question_key!r}, "
                f"{self.documents_key!r} and the template's variables, got "
                f"{type(inputs).__name__}"
            )
        needed = set(self.prompt.input_variables) - {CONTEXT_VARIABLE}
        missing = sorted(needed - set(inputs))
        for key in (self.question_key, self.documents_key):
            if key not in inputs and key not in missing:
                missing.append(key)
        if missing:
            raise InputError(
                f"the input lacks {missing}; pass them in the input dict (the template "
                f"needs {sorted(needed)}, plus {self.question_key!r} and {self.documents_key!r})"
            )
        if CONTEXT_VARIABLE in inputs:
            raise InputError(
                "the input holds 'context': PhaseAwarePrompt writes the context itself; pass "
                f"the retrieved documents as {self.documents_key!r} instead"
            )
        return {k: v for k, v in inputs.items() if k in needed}

    def _template(self, inputs: Mapping[str, Any]) -> tuple[list[BaseMessage], ConversationLayout]:
        """The formatted messages (sentinel in the slot) and their layout."""
        sentinel = f"PHASEAWARE_CONTEXT_{uuid.uuid4().hex}"
        formatted = self.prompt.format_messages(**self._variables(inputs), context=sentinel)
        messages: list[Message] = []
        parts: list[list[Part]] = []
        for index, message in enumerate(formatted):
            text = message_text(message, index)
            pieces = text.split(sentinel)
            if len(pieces) > 2:
                raise DuplicateSlotError(
                    f"message {index} holds {{context}} {len(pieces) - 1} times; keep one"
                )
            parsed = parse_message(message_dict(message, index), index=index)
            messages.append(parsed)
            if len(pieces) == 2:
                parts.append([pieces[0], Placeholder.CONTEXT, pieces[1]])
            else:
                parts.append([text])
        template = ConversationTemplate.from_parts(messages, parts)  # one slot, checked
        return formatted, ConversationLayout(template, self.chat_format)

    def place(self, inputs: Mapping[str, Any]) -> PlacedPrompt:
        """Assemble once; the messages and the assembly behind them."""
        formatted, layout = self._template(inputs)
        question = inputs[self.question_key]
        if not isinstance(question, str):
            raise InputError(f"{self.question_key!r} must be a string, got {question!r}")
        documents = tuple(inputs[self.documents_key])
        chunks: Sequence[Chunk] = document_chunks(
            documents, score_keys=self.score_keys, evidence_key=self.evidence_key
        )
        result = assemble(
            chunks or [Chunk(text="", id="doc-none")],
            tokenizer=self.tokenizer,
            chat_format=cast(PromptLayout, layout),  # ConversationLayout implements it
            question=question,
            profile=self.profile,
            budget_tokens=self.budget_tokens,
            options=self.options,
        )
        if not chunks:  # the stand-in empty chunk is not the caller's: keep it out of the report
            result = replace(result, dropped=())
        slot = layout.slot_index
        filled = layout.filled(context=result.context, question=question)
        out = list(formatted)
        out[slot] = formatted[slot].model_copy(update={"content": filled[slot].content})
        return PlacedPrompt(ChatPromptValue(messages=out), result, documents)

    # -- Runnable ---------------------------------------------------------------------------

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> ChatPromptValue:
        return self._call_with_config(
            lambda inputs: self.place(inputs).value, input, config, run_type="prompt"
        )

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> ChatPromptValue:
        """``invoke`` in the default executor (assembly is CPU-bound; see the class doc)."""
        return cast(ChatPromptValue, await run_in_executor(config, self.invoke, input, config))

    async def abatch(
        self,
        inputs: list[dict[str, Any]],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[ChatPromptValue]:
        """One ``ainvoke`` per input, concurrently (each in a worker thread)."""
        return await super().abatch(inputs, config, return_exceptions=return_exceptions, **kwargs)

    def with_report(self) -> PhaseAwarePromptWithReport:
        """A runnable returning ``{"prompt": ChatPromptValue, "report": dict}`` per call.

        The report is :func:`placement_report` of the same assembly that made the
        prompt (no second assembly, no state kept between calls).
        """
        return PhaseAwarePromptWithReport(self)

    def __repr__(self) -> str:
        return (
            f"PhaseAwarePrompt(tokenizer={self.tokenizer.spec!r}, "
            f"chat_format={self.chat_format.name!r}, "
            f"profile={self.profile.model if self.profile else None!r}, "
            f"budget_tokens={self.budget_tokens})"
        )


class PhaseAwarePromptWithReport(Runnable[dict[str, Any], dict[str, Any]]):
    """``PhaseAwarePrompt`` whose output is ``{"prompt": ChatPromptValue, "report": dict}``."""

    def __init__(self, prompt: PhaseAwarePrompt) -> None:
        self.bound = prompt

    def _run(self, inputs: dict[str, Any]) -> dict[str, Any]:
        placed = self.bound.place(inputs)
        return {"prompt": placed.value, "report": placed.report()}

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return self._call_with_config(self._run, input, config, run_type="prompt")

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """``invoke`` in the default executor (assembly is CPU-bound)."""
        return cast(dict[str, Any], await run_in_executor(config, self.invoke, input, config))
