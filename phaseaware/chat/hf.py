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

import json
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phaseaware.caches import BoundedCache
from phaseaware.chat.errors import TemplateRewriteError
from phaseaware.chat.hf_message_wise import message_wise
from phaseaware.chat.hf_tools import template_message, template_tools
from phaseaware.chat.messages import COMMON_ROLES, Message, check_roles, check_tool_results
from phaseaware.chat.prefix_renders import PrefixRenders
from phaseaware.chat.settings import ChatSettings
from phaseaware.errors import PhaseawareError, TemplateError, TemplateLimitError
from phaseaware.tokenizers.base import ChatTemplateTokenizer
from phaseaware.tokenizers.hf_template import TEMPLATE_CHARS

__all__ = ["HFChatFormat"]


class HFChatFormat:
    """``apply_chat_template`` of the tokenizer, with ``enable_thinking``/``thinking``,
    the bound ``tools`` and tool-call ``arguments`` as the server passes them
    (:mod:`phaseaware.chat.hf_tools`; ``tool_arguments``: see :class:`ChatSettings`)."""

    name = "hf"
    chat = True
    supported_settings = frozenset({"thinking", "tools", "tool_arguments"})
    supported_roles = COMMON_ROLES
    markers: tuple[str, ...] = ()  # the tokenizer's special strings cover the template's

    def __init__(
        self,
        tokenizer: object,
        *,
        thinking: bool = False,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_arguments: str | None = None,
    ) -> None:
        if not isinstance(tokenizer, ChatTemplateTokenizer) or tokenizer.chat_template is None:
            spec = getattr(tokenizer, "spec", tokenizer)
            raise TemplateError(
                f"tokenizer {spec!r} has no chat template; use chat_format (--chat-format) "
                "chatml, deepseek-v4 or none, or an hf: tokenizer with a template"
            )
        self._tokenizer = tokenizer
        self.thinking = thinking
        self.settings = ChatSettings(
            thinking=thinking, tools=tuple(tools), tool_arguments=tool_arguments
        )  # checked copies
        self._tools = template_tools(self.settings.tools)
        self._object_arguments = self.settings.tool_arguments != "string"
        # (template, key of kept renders): the key is worked out once per template
        self._key: tuple[str | None, tuple[object, ...] | None] | None = None

    def __repr__(self) -> str:
        tools = f", tools={self._tools!r}" if self._tools else ""
        return f"HFChatFormat(tokenizer={self._tokenizer.spec!r}, thinking={self.thinking}{tools})"

    def _apply(self, messages: Sequence[Message], add_generation_prompt: bool) -> str:
        # both names are in use (Qwen3: enable_thinking; DeepSeek V3.1: thinking)
        try:
            return self._tokenizer.render_chat(
                [template_message(m, object_arguments=self._object_arguments) for m in messages],
                add_generation_prompt=add_generation_prompt,
                enable_thinking=self.thinking,
                thinking=self.thinking,
                tools=self._tools,
            )
        except TemplateLimitError:  # the template itself, whatever the messages
            raise
        except TemplateError as exc:
            check_tool_results(messages)  # the usual cause: a tool result answering no call
            if self._object_arguments and any(m.tool_calls for m in messages):
                self._explain_arguments(messages, add_generation_prompt, exc)
            raise

    def _explain_arguments(
        self, messages: Sequence[Message], add_generation_prompt: bool, exc: TemplateError
    ) -> None:
        """Raise the fix when the template fails only on tool-call arguments as an object."""
        try:
            self._tokenizer.render_chat(
                [template_message(m, object_arguments=False) for m in messages],
                add_generation_prompt=add_generation_prompt, enable_thinking=self.thinking,
                thinking=self.thinking, tools=self._tools,
            )  # fmt: skip
        except TemplateError:
            return  # it fails either way: the original error stands
        raise TemplateError(
            f"{exc}: the template takes tool-call arguments as JSON text, but vLLM, SGLang "
            "and llama-server hand them to it as a JSON object, and fail on this "
            "conversation the same way; a server that passes the text (llama-cpp-python) "
            "renders it: ChatSettings(tool_arguments='string')"
        ) from exc

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        """The template's text; raises ``TemplateRewriteError`` unless every message's
        content appears verbatim, once, in order.

        Incremental where the template is proven message-wise
        (:mod:`phaseaware.chat.hf_message_wise`) and a render of the conversation's
        start is kept: the new messages are rendered (and checked) after the first
        message alone, and their text follows the kept one. Otherwise, and on any error
        (raised then by the whole render, with the conversation's own indices), the
        whole conversation is rendered."""
        check_roles(messages, chat_format=self.name, roles=self.supported_roles)
        messages = tuple(messages)
        key = self._kept_key()
        text = None if key is None else self._after_kept(key, messages, add_generation_prompt)
        if text is None:
            text = self._checked(messages, add_generation_prompt)
            if key is not None:
                self._keep(key, messages, text, add_generation_prompt)
        return text

    def _kept_key(self) -> tuple[object, ...] | None:
        """What the template's text depends on besides the messages, or None where the
        template is not proven message-wise (or the tokenizer renders by its own rule)."""
        from phaseaware.tokenizers.hf import HFTokenizer

        tokenizer = self._tokenizer
        if not isinstance(tokenizer, HFTokenizer) or (
            type(tokenizer).render_chat is not HFTokenizer.render_chat
        ):
            return None
        template = tokenizer.chat_template
        if self._key is not None and self._key[0] is template:  # the template not replaced
            return self._key[1]
        closing = None if template is None else message_wise(template)
        key: tuple[object, ...] | None = None
        if closing is not None:
            special = tokenizer.hf_tokenizer.special_tokens_map
            key = (
                tokenizer.fingerprint(), template, closing, self.thinking,
                tuple(sorted((k, repr(v)) for k, v in special.items())),
                json.dumps(self._tools, sort_keys=True, default=repr), self._object_arguments,
            )  # fmt: skip
        self._key = (template, key)
        return key

    def _ends(self, key: tuple[object, ...], first: Message) -> tuple[str, str, str] | None:
        """The text of ``[first]`` without a closing, and the closings without and with
        the generation prompt (None where the renders do not end so: nothing is kept)."""
        found = _ENDS.get((key, first))
        if found is None:
            closing = str(key[2])  # the closing without the prompt, from the proof
            alone = self._checked((first,), False)
            prompted = self._checked((first,), True)
            base = alone[: len(alone) - len(closing)]
            if not alone.endswith(closing) or not prompted.startswith(base):
                return None
            found = (base, closing, prompted[len(base) :])
            _ENDS.put((key, first), found)
        return found

    def _keep(
        self, key: tuple[object, ...], messages: tuple[Message, ...], text: str, prompted: bool
    ) -> None:
        """Keep ``text`` (of ``messages``) without its closing, for the next step."""
        if len(messages) < 2:
            return
        try:
            ends = self._ends(key, messages[0])
        except PhaseawareError:
            return
        closing = None if ends is None else ends[2 if prompted else 1]
        if closing is not None and text.endswith(closing):
            _KEPT.put(key, _KeptRender(messages, text[: len(text) - len(closing)]))

    def _after_kept(
        self, key: tuple[object, ...], messages: tuple[Message, ...], add_generation_prompt: bool
    ) -> str | None:
        """The text of ``messages`` after a kept render of their start, or None."""
        kept = _KEPT.longest(key, messages, min_messages=2)
        if kept is None:
            return None
        first, n = messages[0], len(kept.messages)
        try:
            ends = self._ends(key, first)
            window = self._checked((first, *messages[n:]), add_generation_prompt)
        except PhaseawareError:
            return None
        if ends is None or not window.startswith(ends[0]):
            return None
        if len(kept.text) + len(window) - len(ends[0]) > TEMPLATE_CHARS:
            return None  # over the size bound: the whole render raises it
        text = kept.text + window[len(ends[0]) :]
        if n < len(messages):
            self._keep(key, messages, text, add_generation_prompt)
        return text

    def _checked(self, messages: Sequence[Message], add_generation_prompt: bool) -> str:
        """The whole render of ``messages``, each content checked verbatim, once, in order."""
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


@dataclass(frozen=True)
class _KeptRender:
    """A checked render of ``messages`` without its closing (a start of every longer one)."""

    messages: tuple[Message, ...]
    text: str


# by template key, length and last message (see prefix_renders)
_KEPT: PrefixRenders[_KeptRender] = PrefixRenders(
    name="chat.hf kept renders", size_of=lambda kept: sys.getsizeof(kept.text)
)
# by template key and first message: its text alone, and the closings
_ENDS: BoundedCache[tuple[tuple[object, ...], Message], tuple[str, str, str]] = BoundedCache(
    max_entries=64,
    max_bytes=16 << 20,
    size_of=lambda _, ends: sum(sys.getsizeof(t) for t in ends),
    name="chat.hf first-message renders",
)
