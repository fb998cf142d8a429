"""``PhaseAwareChatPromptBuilder``: a ``ChatPromptBuilder`` whose documents land where the
model reads them reliably, with the exact messages phaseaware planned and its report."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.components.builders import ChatPromptBuilder
from haystack.dataclasses import ChatMessage
from haystack_integrations.utils.phaseaware import (
    SLOT_VARIABLE,
    document_records,
    message_dicts,
    plain_target_args,
    slot_template,
    with_text,
)

import phaseaware.integrate as kit
from phaseaware.errors import InputError

__all__ = ["PhaseAwareChatPromptBuilder"]

_OWN_INPUTS = ("documents", "question", SLOT_VARIABLE)


@component
class PhaseAwareChatPromptBuilder:
    """Renders ``template`` as ``ChatPromptBuilder`` does, then places the documents where
    its loop over ``documents`` was (see :mod:`haystack_integrations.utils.phaseaware.template`)
    so that each document's evidence lands on a reliable position, verified by
    re-tokenizing.

    Inputs: ``documents`` (a retriever's or ranker's output; ``score`` is the relevance,
    ``meta["evidence"]`` the key strings), ``question`` and the template's other variables.
    Outputs: ``prompt`` (the messages; connect it to ``OpenAIChatGenerator.messages``) and
    ``report`` (positions, residues, dropped and merged documents: the kit's placement
    report, each placement with its ``document_id``).

    The target arguments are the kit's (:class:`phaseaware.integrate.TargetArgs`):
    ``tokenizer`` and ``chat_format`` as the server renders, ``profile`` (a model name or
    profile path; ``None``: lost in the middle), ``budget_tokens`` (the whole prompt),
    ``options`` (a dict of ``AssemblyOptions`` fields), ``endpoint`` (a
    ``probe-endpoint`` record path), ``thinking``, ``settings``, ``state_settings``.
    The tokenizer and profile load in :meth:`warm_up` (a pipeline calls it; ``run``
    does on first use), never at construction.
    """

    def __init__(  # noqa: PLR0913 (the kit's target keywords, spelled out for YAML)
        self,
        template: list[ChatMessage] | str,
        *,
        tokenizer: str | kit.Tokenizer,
        chat_format: str,
        profile: str | None,
        budget_tokens: int,
        options: dict[str, Any] | None = None,
        position_offset: int | None = None,
        endpoint: str | dict[str, Any] | None = None,
        thinking: bool = False,
        settings: dict[str, Any] | None = None,
        state_settings: bool = True,
        required_variables: list[str] | Literal["*"] | None = "*",
        variables: list[str] | None = None,
        evidence_key: str | None = kit.EVIDENCE_KEY,
    ) -> None:
        self.template = template
        self.required_variables = required_variables
        self.variables = variables
        self.evidence_key = evidence_key
        self._target_args: dict[str, Any] = {
            "tokenizer": tokenizer, "chat_format": chat_format, "profile": profile,
            "budget_tokens": budget_tokens, "options": options,
            "position_offset": position_offset, "endpoint": endpoint, "thinking": thinking,
            "settings": settings, "state_settings": state_settings,
        }  # fmt: skip
        required = required_variables
        if isinstance(required, list):
            required = [*required, *(v for v in _OWN_INPUTS if v not in required)]
        self._renderer = ChatPromptBuilder(
            template=slot_template(template), required_variables=required,
            variables=[*variables, *_OWN_INPUTS] if variables else None,
        )  # fmt: skip
        for name in self._renderer.variables:
            if name in _OWN_INPUTS:
                continue
            if required_variables == "*" or name in (required_variables or ()):
                component.set_input_type(self, name, Any)
            else:
                component.set_input_type(self, name, Any, "")
        self._target: kit.Target | None = None

    def warm_up(self) -> None:
        """Load the tokenizer, chat format, profile and endpoint record (once)."""
        if self._target is None:
            self._target = kit.target_of(self._target_args)

    @property
    def target(self) -> kit.Target:
        """The resolved target (loads it on first use)."""
        self.warm_up()
        assert self._target is not None  # noqa: S101 (warm_up sets it)
        return self._target

    def generation_kwargs(self) -> dict[str, Any]:
        """What ``OpenAIChatGenerator(generation_kwargs=...)`` must send so that the server
        renders the planned chat settings (``{"extra_body": {"chat_template_kwargs": ...}}``,
        or ``{}`` when there is nothing to state)."""
        return self.target.request_kwargs()

    @component.output_types(prompt=list[ChatMessage], report=dict[str, Any])
    def run(
        self,
        documents: list[Document],
        question: str,
        template_variables: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The planned messages and the report for ``documents`` (see the class docstring);
        ``template_variables`` overrides pipeline variables, as in ``ChatPromptBuilder``."""
        if not isinstance(question, str):
            raise InputError(f"question must be a string, got {type(question).__name__}")
        records = document_records(documents, evidence_key=self.evidence_key)
        marker = kit.slot_marker()
        own = {"documents": list(documents), "question": question, SLOT_VARIABLE: marker}
        variables = {**kwargs, **(template_variables or {}), **own}
        rendered: list[ChatMessage] = self._renderer.run(template_variables=variables)["prompt"]
        target = self.target
        layout = kit.conversation(target, message_dicts(rendered), slot_marker=marker)
        slot = kit.fill_slot(layout, records, target=target, question=question)
        prompt = list(rendered)
        prompt[slot.index] = with_text(rendered[slot.index], slot.content)
        report = kit.placement_report(slot.result, [d.id for d in documents])
        return {"prompt": prompt, "report": report}

    @component.output_types(prompt=list[ChatMessage], report=dict[str, Any])
    async def run_async(
        self,
        documents: list[Document],
        question: str,
        template_variables: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """:meth:`run` in a worker thread (tokenizing is CPU work): the same output."""
        return await asyncio.to_thread(
            self.run, documents, question, template_variables=template_variables, **kwargs
        )

    def to_dict(self) -> dict[str, Any]:
        """The component's init parameters, YAML-safe (the template as ``ChatPromptBuilder``
        writes it)."""
        template: Any = self.template
        if isinstance(template, list):
            template = [m.to_dict() for m in template]
        return default_to_dict(
            self, template=template, required_variables=self.required_variables,
            variables=self.variables, evidence_key=self.evidence_key,
            **plain_target_args(self._target_args),
        )  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PhaseAwareChatPromptBuilder:
        """The component :meth:`to_dict` wrote."""
        params = data.get("init_parameters", {})
        template = params.get("template")
        if isinstance(template, list):
            params["template"] = [ChatMessage.from_dict(m) for m in template]
        return default_from_dict(cls, data)
