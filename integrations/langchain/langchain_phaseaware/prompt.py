"""``PhaseAwarePrompt``: the exact path from retrieved ``Document`` objects to chat messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from langchain_core.documents import Document
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig

import phaseaware.integrate as kit
from langchain_phaseaware.convert import SCORE_KEYS, document_records, message_dicts, tool_schemas
from langchain_phaseaware.served import delivers_replies
from phaseaware import AssemblyResult
from phaseaware.errors import InputError

__all__ = ["PhaseAwarePrompt", "PhaseAwarePromptWithReport", "PlacedPrompt", "placement_report"]


def placement_report(result: AssemblyResult, documents: Sequence[Document]) -> dict[str, Any]:
    """:func:`phaseaware.integrate.placement_report` with each placement's ``Document.id``."""
    return kit.placement_report(result, [d.id for d in documents])


@dataclass(frozen=True)
class PlacedPrompt:
    """One call's output: the messages, the assembly behind them and the documents."""

    value: ChatPromptValue
    result: AssemblyResult
    documents: tuple[Document, ...]

    def report(self) -> dict[str, Any]:
        return placement_report(self.result, self.documents)


class PhaseAwarePrompt(Runnable[dict[str, Any], ChatPromptValue]):
    """A prompt step that places retrieved documents where the model reads them reliably:
    ``prompt``, a ``ChatPromptTemplate`` with ``{context}`` once; ``tools``, the tools the
    model is bound with; the target arguments: :class:`phaseaware.integrate.TargetArgs`.
    Input: ``question``, ``documents`` (score from ``score_keys``, evidence from
    ``evidence_key``) and the template's variables. Output: a ``ChatPromptValue`` that
    renders to exactly the verified prompt (details: the package README)."""

    def __init__(
        self,
        prompt: ChatPromptTemplate,
        *,
        question_key: str = "question",
        documents_key: str = "documents",
        score_keys: Sequence[str] = SCORE_KEYS,
        evidence_key: str | None = "evidence",
        tools: Sequence[Any] | None = None,
        **target: Unpack[kit.TargetArgs],
    ) -> None:
        if not isinstance(prompt, ChatPromptTemplate):
            raise InputError(
                f"prompt must be a langchain ChatPromptTemplate, got {type(prompt).__name__}; "
                "build one with ChatPromptTemplate.from_messages([...])"
            )
        kit.check_context_variable(prompt.input_variables)
        self.prompt = prompt
        self.target = kit.target_of(target).with_tools(tool_schemas(tools))
        self.question_key = question_key
        self.documents_key = documents_key
        self.score_keys = tuple(score_keys)
        self.evidence_key = evidence_key

    def model_kwargs(self, model: object = None) -> dict[str, Any]:
        """What the model after this prompt is bound with so the server renders the planned
        chat settings (``{"extra_body": {"chat_template_kwargs": ...}}``, or ``{}``).
        ``model``: that chat model; where its clients hand reply bodies over
        (``prompt_ids_clients``) and the endpoint record names vLLM or SGLang, the
        request also asks for the prompt's ids, which ``PhaseAwareUsageCheck`` compares."""
        may_stream = getattr(model, "disable_streaming", False) is not True
        asks = (
            model is not None
            and any(delivers_replies(model, asynchronous=a) for a in (False, True))
            and self.target.asks_prompt_ids(may_stream=may_stream)
        )
        return self.target.request_kwargs(prompt_ids=asks)

    @property
    def InputType(self) -> type[dict[str, Any]]:  # noqa: N802 (OutputType is inferred)
        return dict

    def place(self, inputs: Mapping[str, Any]) -> PlacedPrompt:
        """Assemble once; the messages and the assembly behind them."""
        marker = kit.slot_marker()
        variables = kit.template_inputs(
            inputs, variables=self.prompt.input_variables, question_key=self.question_key,
            documents_key=self.documents_key, who="PhaseAwarePrompt",
        )  # fmt: skip
        formatted = self.prompt.format_messages(**variables, context=marker)
        layout = kit.conversation(self.target, message_dicts(formatted), slot_marker=marker)
        raw = inputs[self.documents_key]
        records = document_records(raw, score_keys=self.score_keys, evidence_key=self.evidence_key)
        question = inputs[self.question_key]
        slot = kit.fill_slot(layout, records, target=self.target, question=question)
        out = list(formatted)
        out[slot.index] = formatted[slot.index].model_copy(update={"content": slot.content})
        return PlacedPrompt(ChatPromptValue(messages=out), slot.result, tuple(raw))

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> ChatPromptValue:
        return self._call_with_config(
            lambda inputs: self.place(inputs).value, input, config, run_type="prompt"
        )

    def with_report(self) -> PhaseAwarePromptWithReport:
        """A runnable returning ``{"prompt": ChatPromptValue, "report": dict}`` per call."""
        return PhaseAwarePromptWithReport(self)

    def __repr__(self) -> str:  # the resolved tokenizer, format, profile, ...: ``.target``
        return f"PhaseAwarePrompt({kit.target_keywords(self.target)})"


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
