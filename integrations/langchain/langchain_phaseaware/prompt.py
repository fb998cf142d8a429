"""``PhaseAwarePrompt``: the exact path from retrieved ``Document`` objects to chat messages.

The caller's ``ChatPromptTemplate`` holds ``{context}`` once, in any message. Every
other variable is formatted by LangChain as usual; ``{context}`` becomes phaseaware's
context slot (the template is formatted with a random sentinel for ``context`` and
split there, so braces or the text ``{context}`` inside the caller's variables are
never read as placeholders). Planning, the report and the checks are
:mod:`phaseaware.integrate`'s; this module converts LangChain types.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from langchain_core.documents import Document
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import run_in_executor

from langchain_phaseaware.convert import (
    SCORE_KEYS,
    document_records,
    message_dicts,
    tool_schemas,
)
from phaseaware import AssemblyOptions, AssemblyResult, Profile
from phaseaware.errors import InputError
from phaseaware.integrate import (
    AssemblyRequest,
    ChatFormat,
    ChatSettings,
    EndpointRef,
    MissingSlotError,
    Tokenizer,
    assemble_records,
    conversation,
    resolve_target,
)
from phaseaware.integrate import placement_report as kit_report

__all__ = ["PhaseAwarePrompt", "PhaseAwarePromptWithReport", "PlacedPrompt", "placement_report"]

CONTEXT_VARIABLE = "context"


def placement_report(result: AssemblyResult, documents: Sequence[Document]) -> dict[str, Any]:
    """:func:`phaseaware.integrate.placement_report` with each placement's ``Document.id``."""
    return kit_report(result, [d.id for d in documents])


@dataclass(frozen=True)
class PlacedPrompt:
    """One call's output: the messages, the assembly behind them and the documents."""

    value: ChatPromptValue
    result: AssemblyResult
    documents: tuple[Document, ...]

    def report(self) -> dict[str, Any]:
        return placement_report(self.result, self.documents)


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
    (``score_keys``); evidence strings from ``metadata["evidence"]``
    (``evidence_key``), else the question's key terms. Unscored documents rank
    after every scored one, in retrieval order (all unscored: retrieval order).
    ``position_offset``: tokens the server adds before the prompt (e.g. 1 for a
    BOS the prompt text lacks). ``endpoint``: what ``phaseaware probe-endpoint``
    learned (an ``EndpointRecord``, a record path or ``{"base_url", "model"}``):
    its offset, or for a varying endpoint its offset set (robust placement); a
    record probed with another tokenizer raises ``FingerprintMismatchError``, an
    explicit offset that disagrees with it ``InputError``. ``tools``: the tools the
    chat model is bound with (``llm.bind_tools(tools)``), planned as the server
    renders their schemas (``deepseek-v4``/``deepseek-v4.1``); a format that
    cannot render them raises ``UnsupportedSettingError`` naming the fix.
    ``settings`` / ``thinking``: the chat settings the plan is made with (a
    ``ChatSettings`` or its dict); bind the model with them, ``prompt | llm.bind(
    **prompt.model_kwargs())``, so the server renders the same. ``state_settings=False``
    (the client states nothing) plans with the endpoint record's ``server_default``.

    Empty ``documents`` give the template with an empty context. Raises
    ``MissingSlotError``/``DuplicateSlotError`` (no or several ``{context}``)
    and ``InputError`` (missing variables, ``None`` or ill-typed documents).

    Streaming: ``stream``/``astream`` yield the one ``ChatPromptValue`` (a prompt is
    not streamed; the chat model after it is). Async: assembly is CPU-bound, so
    ``ainvoke``/``abatch`` run it in LangChain's default executor.
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
        settings: ChatSettings | Mapping[str, Any] | None = None,
        state_settings: bool = True,
        question_key: str = "question",
        documents_key: str = "documents",
        score_keys: Sequence[str] = SCORE_KEYS,
        evidence_key: str | None = "evidence",
        tools: Sequence[Any] | None = None,
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
        self.prompt = prompt
        self.target = resolve_target(
            AssemblyRequest(
                tokenizer=tokenizer, chat_format=chat_format, profile=profile,
                budget_tokens=budget_tokens, options=options, position_offset=position_offset,
                thinking=thinking, settings=settings,
            ),
            endpoint=endpoint,
            state_settings=state_settings,
        ).with_tools(tool_schemas(tools))  # fmt: skip
        self.question_key = question_key
        self.documents_key = documents_key
        self.score_keys = tuple(score_keys)
        self.evidence_key = evidence_key

    def model_kwargs(self) -> dict[str, Any]:
        """What the chat model after this prompt must be bound with so the server renders
        the chat settings the plan was made with: ``llm.bind(**prompt.model_kwargs())``
        (``{"extra_body": {"chat_template_kwargs": {...}}}``; ``{}`` for formats with no
        options or with ``state_settings=False``). A prompt cannot reach the model."""
        return self.target.request_kwargs()

    @property
    def InputType(self) -> type[dict[str, Any]]:  # noqa: N802 (LangChain's name)
        return dict

    @property
    def OutputType(self) -> type[ChatPromptValue]:  # noqa: N802
        return ChatPromptValue

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

    def place(self, inputs: Mapping[str, Any]) -> PlacedPrompt:
        """Assemble once; the messages and the assembly behind them."""
        sentinel = f"PHASEAWARE_CONTEXT_{uuid.uuid4().hex}"
        formatted = self.prompt.format_messages(**self._variables(inputs), context=sentinel)
        layout = conversation(self.target, message_dicts(formatted), slot_marker=sentinel)
        question = inputs[self.question_key]
        if not isinstance(question, str):
            raise InputError(f"{self.question_key!r} must be a string, got {question!r}")
        raw = inputs[self.documents_key]
        records = document_records(raw, score_keys=self.score_keys, evidence_key=self.evidence_key)
        result = assemble_records(records, target=self.target, layout=layout, question=question)
        slot = layout.slot_index
        filled = layout.filled(context=result.context, question=question)
        out = list(formatted)
        out[slot] = formatted[slot].model_copy(update={"content": filled[slot].content})
        return PlacedPrompt(ChatPromptValue(messages=out), result, tuple(raw))

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

    def with_report(self) -> PhaseAwarePromptWithReport:
        """A runnable returning ``{"prompt": ChatPromptValue, "report": dict}`` per call:
        :func:`placement_report` of the same assembly that made the prompt."""
        return PhaseAwarePromptWithReport(self)

    def __repr__(self) -> str:  # the resolved tokenizer, format, profile, ...: ``.target``
        t = self.target
        return (
            f"PhaseAwarePrompt(tokenizer={t.tokenizer.spec!r}, "
            f"chat_format={t.require_format().name!r}, "
            f"profile={t.profile.model if t.profile else None!r}, "
            f"budget_tokens={t.budget_tokens})"
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
