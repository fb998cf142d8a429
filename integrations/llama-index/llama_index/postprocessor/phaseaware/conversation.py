"""The messages LlamaIndex would send for a text-QA template, as a phaseaware conversation.

As ``LLM.predict`` does: a chat LLM gets ``template.format_messages(...)`` through its
``output_parser`` with its ``system_prompt`` first; a completion LLM one string,
``system_prompt + "\n\n" + template.format(...)`` in its ``query_wrapper_prompt``. The
context slot is written ``{context}`` and the query ``{question}``.
"""

from __future__ import annotations

import secrets
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.chat_prompts import CHAT_TEXT_QA_PROMPT
from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT

from phaseaware.errors import InputError

__all__ = ["default_text_qa_messages", "is_chat_llm", "text_qa_conversation", "to_chat_messages"]

_PLACEHOLDERS = ("{context}", "{question}")


def is_chat_llm(llm: LLM | None) -> bool:
    """Whether ``llm`` is called with messages (``chat``) rather than a string (``complete``)."""
    return True if llm is None else bool(llm.metadata.is_chat_model)


def _contents(
    template: BasePromptTemplate, llm: LLM | None, context: str, query: str
) -> list[dict[str, str]]:
    if is_chat_llm(llm):
        messages = template.format_messages(llm=llm, context_str=context, query_str=query)
        if llm is not None and llm.output_parser is not None:
            messages = llm.output_parser.format_messages(messages)
        if llm is not None and llm.system_prompt:
            messages = [ChatMessage(role=MessageRole.SYSTEM, content=llm.system_prompt), *messages]
        out = []
        for i, message in enumerate(messages):
            if not isinstance(message.content, str):
                raise InputError(f"text QA template message {i} holds no text; use text messages")
            out.append({"role": str(message.role.value), "content": message.content})
        return out
    text = template.format(llm=llm, context_str=context, query_str=query)
    if llm is not None and llm.system_prompt:
        text = llm.system_prompt + "\n\n" + text
    if llm is not None and llm.query_wrapper_prompt is not None:
        text = llm.query_wrapper_prompt.format(query_str=text)
    return [{"role": "user", "content": text}]


def text_qa_conversation(
    template: BasePromptTemplate | None = None, *, llm: LLM | None = None
) -> list[dict[str, str]]:
    """The messages ``llm`` would get from ``template`` (default: LlamaIndex's text QA
    prompt); ``InputError`` when its own text holds ``{context}``/``{question}``."""
    if template is None:  # what DEFAULT_TEXT_QA_PROMPT_SEL selects for this LLM
        template = CHAT_TEXT_QA_PROMPT if is_chat_llm(llm) else DEFAULT_TEXT_QA_PROMPT
    tag = secrets.token_hex(8)
    context, query = f"PHASEAWARE_CONTEXT_{tag}", f"PHASEAWARE_QUERY_{tag}"
    messages = _contents(template, llm, context, query)
    for message in messages:
        for literal in _PLACEHOLDERS:
            if literal in message["content"]:
                raise InputError(
                    f"the text QA template's own text contains {literal} literally; reword it "
                    "(phaseaware uses {context} and {question} as its placeholders)"
                )
        message["content"] = (
            message["content"].replace(context, "{context}").replace(query, "{question}")
        )
    if sum(m["content"].count("{context}") for m in messages) != 1:
        raise InputError(
            "the text QA template must use {context_str} exactly once; phaseaware places the "
            "retrieved chunks there"
        )
    return messages


def default_text_qa_messages() -> list[dict[str, str]]:
    """LlamaIndex's default chat text-QA conversation (its system message, then the user turn)."""
    return text_qa_conversation(None, llm=None)


def to_chat_messages(messages: Any) -> list[ChatMessage]:
    """phaseaware's OpenAI-style message dicts as LlamaIndex ``ChatMessage`` objects."""
    return [ChatMessage(role=MessageRole(m["role"]), content=m["content"]) for m in messages]
