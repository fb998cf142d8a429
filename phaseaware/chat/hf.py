"""The tokenizer's own Jinja chat template as a chat format, checked for fidelity.

Exact placement needs every message's text to reach the prompt verbatim and in
order. Real templates do not always do that: some strip whitespace (``| trim``),
drop or merge system messages, move every system message to the front
(DeepSeek-V3), or cut an assistant's text at ``</think>``. So each render is
checked: every message with content is rendered once more with its content
replaced by a unique marker; the markers must appear exactly once each, in
message order, and substituting the real contents back must give the real
render. Otherwise :class:`~phaseaware.chat.errors.TemplateRewriteError` names
the first offending message, its role and what happened.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from phaseaware.chat.errors import TemplateRewriteError
from phaseaware.chat.hf_tools import template_tools
from phaseaware.chat.messages import COMMON_ROLES, Message, check_roles, check_tool_results
from phaseaware.chat.settings import ChatSettings
from phaseaware.errors import TemplateError, TemplateLimitError
from phaseaware.tokenizers.base import ChatTemplateTokenizer

__all__ = ["HFChatFormat"]


class HFChatFormat:
    """``apply_chat_template`` of the tokenizer, with ``enable_thinking``/``thinking`` and
    the bound ``tools`` as the server passes them (:mod:`phaseaware.chat.hf_tools`)."""

    name = "hf"
    chat = True
    supported_settings = frozenset({"thinking", "tools"})
    supported_roles = COMMON_ROLES
    markers: tuple[str, ...] = ()  # the tokenizer's special strings cover the template's

    def __init__(
        self,
        tokenizer: object,
        *,
        thinking: bool = False,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        if not isinstance(tokenizer, ChatTemplateTokenizer) or tokenizer.chat_template is None:
            spec = getattr(tokenizer, "spec", tokenizer)
            raise TemplateError(
                f"tokenizer {spec!r} has no chat template; use chat_format (--chat-format) "
                "chatml, deepseek-v4 or none, or an hf: tokenizer with a template"
            )
        self._tokenizer = tokenizer
        self.thinking = thinking
        self.settings = ChatSettings(thinking=thinking, tools=tuple(tools))  # checked copies
        self._tools = template_tools(self.settings.tools)

    def __repr__(self) -> str:
        tools = f", tools={self._tools!r}" if self._tools else ""
        return f"HFChatFormat(tokenizer={self._tokenizer.spec!r}, thinking={self.thinking}{tools})"

    def _apply(self, messages: Sequence[Message], add_generation_prompt: bool) -> str:
        # both names are in use (Qwen3: enable_thinking; DeepSeek V3.1: thinking)
        try:
            return self._tokenizer.render_chat(
                [m.to_openai() for m in messages],
                add_generation_prompt=add_generation_prompt,
                enable_thinking=self.thinking,
                thinking=self.thinking,
                tools=self._tools,
            )
        except TemplateLimitError:  # the template itself, whatever the messages
            raise
        except TemplateError:
            check_tool_results(messages)  # the usual cause: a tool result answering no call
            raise

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        """The template's text; raises ``TemplateRewriteError`` unless every message's
        content appears verbatim, once, in order."""
        check_roles(messages, chat_format=self.name, roles=self.supported_roles)
        text = self._apply(messages, add_generation_prompt)
        markers = {
            i: f"PHASEAWAREMSG{i}X{uuid.uuid4().hex[:12].upper()}"
            for i, m in enumerate(messages)
            if m.content
        }
        marked = [m.with_content(markers[i]) if i in markers else m for i, m in enumerate(messages)]
        marked_text = self._apply(marked, add_generation_prompt)
        self._check_markers(messages, markers, marked_text)
        if text != _substituted(marked_text, markers, messages):
            self._diagnose(messages, markers, marked, marked_text, add_generation_prompt)
        return text

    def _fail(self, messages: Sequence[Message], index: int, change: str, detail: str) -> None:
        raise TemplateRewriteError(
            f"chat template of {self._tokenizer.spec!r} {detail} message {index} "
            f"({messages[index].role}), so text in it cannot be placed exactly; " + _FIXES[change],
            index=index,
            change=change,
        )

    def _check_markers(
        self, messages: Sequence[Message], markers: dict[int, str], marked_text: str
    ) -> None:
        last_at, last_index = -1, -1
        for i, marker in markers.items():
            count = marked_text.count(marker)
            if count == 0 and marker.lower() in marked_text.lower():
                self._fail(messages, i, "rewritten", "changes the letter case of")
            if count == 0:
                self._fail(messages, i, "dropped", "drops")
            if count > 1:
                self._fail(messages, i, "repeated", f"repeats ({count} copies)")
            at = marked_text.index(marker)
            if at < last_at:
                self._fail(messages, i, "moved", f"moves before message {last_index} the")
            last_at, last_index = at, i

    def _diagnose(
        self,
        messages: Sequence[Message],
        markers: dict[int, str],
        marked: Sequence[Message],
        marked_text: str,
        add_generation_prompt: bool,
    ) -> None:
        """Find the first message whose real content the template changes."""
        probe = list(marked)
        for i in markers:
            probe[i] = messages[i]
            text = self._apply(probe, add_generation_prompt)
            expected = marked_text
            for j in markers:
                if j <= i:
                    expected = expected.replace(markers[j], messages[j].content)
            if text != expected:
                content = messages[i].content
                stripped = content.strip() != content and content.strip() in text
                if stripped:
                    self._fail(messages, i, "stripped whitespace", "strips whitespace around")
                self._fail(messages, i, "rewritten", "rewrites the content of")
        raise TemplateRewriteError(  # each message alone renders verbatim, together they do not
            f"chat template of {self._tokenizer.spec!r} renders the messages differently "
            "together than one by one; use chat format chatml or deepseek-v4",
            index=len(messages) - 1,
            change="rewritten",
        )


def _substituted(marked_text: str, markers: dict[int, str], messages: Sequence[Message]) -> str:
    """``marked_text`` with each marker (there once each, in message order: checked)
    replaced by its message's content, in one pass (a replace per message would copy
    the whole text once per message)."""
    pieces: list[str] = []
    at = 0
    for i, marker in markers.items():
        found = marked_text.index(marker, at)
        pieces += (marked_text[at:found], messages[i].content)
        at = found + len(marker)
    pieces.append(marked_text[at:])
    return "".join(pieces)


_FIXES = {
    "dropped": "merge it into a message the template keeps, or use chat format chatml",
    "repeated": "use chat format chatml or deepseek-v4",
    "moved": "reorder the messages as the template expects (system first), or use chatml",
    "stripped whitespace": "strip leading/trailing whitespace from it (and from the "
    "context and question at its edges), or use chat format chatml",
    "rewritten": "remove what the template rewrites (e.g. </think> in assistant text), "
    "or use chat format chatml",
}
