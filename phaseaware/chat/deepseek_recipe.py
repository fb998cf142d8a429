"""DeepSeek-V4 / V4.1 as SGLang renders them: DeepSeek's reference encoder under SGLang's rules.

SGLang 0.5.23 renders every ``dsv4`` / ``dsv41`` chat request through
``deepseek-recipe`` (DeepSeek's reference encoder and parser, Rust with Python
bindings), after its own request handling (``sglang/srt/parser/deepseek_recipe_renderer.py``:
``pre_normalize``, ``DeepSeekRecipe.encode``; ``sglang/srt/entrypoints/openai/
serving_deepseek_recipe.py``: ``encode_messages``, ``_encode``). A target whose
``ChatSettings.renderer`` is ``"sglang"`` is rendered here, by recipe itself (the
``sglang`` extra, imported on first use): phaseaware keeps slots, untrusted text and
positions, recipe writes the text. What SGLang does before and after recipe, each
rule once (the test tier runs SGLang's own two files against this module):

- **Messages as sent**, a null content as ``""``; ``developer`` turns become
  ``system`` turns (recipe writes a system message after the first turn at the start
  of the prompt on V4, in place with ``<｜System｜>`` on V4.1).
- **A trailing assistant message is re-sent as a user turn** with its content (its tool
  calls dropped): SGLang continues an assistant message only when the request asks for
  ``continue_final_message``, which phaseaware never sends.
- **Thinking** is ``chat_template_kwargs.thinking`` (phaseaware's requests state it).
- **Effort**: a numeric string is the number it spells; unset or ``none`` is the
  server's default (``SGLANG_DSV4_REASONING_EFFORT`` / ``SGLANG_DSV41_REASONING_EFFORT``,
  else recipe's ``high``; phaseaware's requests state ``high`` in thinking mode, so no
  server default renders a plan). A name goes to recipe, which maps ``minimal`` and
  ``low`` to low, ``medium``, ``high`` and ``xhigh`` to high, ``ultra`` and ``max`` to
  max (V4: the 0731 texts; V4.1: budgets 50 / 75 / 100) and refuses any other string.
  A number is refused on V4 (HTTP 400); on V4.1 an integer 1-100 (or a numeric string
  spelling a fraction 0-0.99, times 100) is the budget, written
  by rewriting recipe's ``high`` line (``Reasoning Effort: 75`` -> ``Reasoning Effort: N``).
- Two assistant messages in a row each open with ``<｜Assistant｜></think>`` (recipe's
  rule; the encoder file continues the first), and recipe keeps no ``drop_thinking``
  switch nor a ``response_format`` phaseaware can state (both refused here).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from phaseaware.chat.deepseek_v4 import ASSISTANT, THINK_CLOSE, THINK_OPEN, USER
from phaseaware.chat.deepseek_v4 import MARKERS as V4_MARKERS
from phaseaware.chat.deepseek_v41 import DEFAULT_TABLE
from phaseaware.chat.deepseek_v41 import MARKERS as V41_MARKERS
from phaseaware.chat.errors import MessageContentError
from phaseaware.chat.messages import Message, check_roles
from phaseaware.chat.settings import (
    EFFORT_NONE,
    SETTING_NAMES,
    ChatSettings,
    UnsupportedSettingError,
    check_supported,
)
from phaseaware.errors import MissingExtraError

__all__ = [
    "DeepSeekRecipeFormat",
    "MODEL_NAMES",
    "RecipeEffort",
    "load_recipe",
    "sglang_body",
    "sglang_effort",
]

#: recipe's model names, by phaseaware chat format (they select the encoding)
MODEL_NAMES = {"deepseek-v4": "DeepSeek-V4-Pro", "deepseek-v4.1": "DeepSeek-V4.1-Flash"}
#: SGLang asks recipe for this tier and rewrites its line to write an integer budget
BUDGET_TIER, BUDGET_TIER_VALUE = "high", 75
BUDGET_LINE = "Reasoning Effort: {budget}"
_NUMERIC = re.compile(r"\d+(\.\d+)?")
_CUT = "phaseaware-placeholder-result-7f3a"  # placeholder tool results, cut off again


@functools.cache
def load_recipe() -> ModuleType:
    """``deepseek_recipe``, imported on first use; :class:`MissingExtraError` naming the
    extra that installs it."""
    try:
        import deepseek_recipe
    except ImportError as exc:
        raise MissingExtraError(
            "a DeepSeek target served by SGLang (renderer='sglang') renders through "
            "deepseek-recipe, DeepSeek's reference encoder, which is not installed: "
            "pip install 'phaseaware[sglang]' (or deepseek-recipe==0.2.0)"
        ) from exc
    return deepseek_recipe


@dataclass(frozen=True)
class RecipeEffort:
    """What SGLang hands recipe for a request's effort: a tier name (``None``: recipe's
    default) and, on V4.1, an integer budget written over the tier's line."""

    tier: str | None = None
    budget: int | None = None


def sglang_effort(chat_format: str, effort: str | int | None) -> RecipeEffort:
    """The effort SGLang's ``_encode`` hands recipe (see the module doc);
    :class:`UnsupportedSettingError` for a number SGLang refuses. Names recipe refuses
    are refused when the format is built (recipe's own message)."""
    value: str | int | float | None = effort
    if isinstance(effort, str) and _NUMERIC.fullmatch(effort.strip()):
        value = float(effort) if "." in effort else int(effort)
    return _resolved(chat_format, value)


def _resolved(chat_format: str, effort: str | int | float | None) -> RecipeEffort:
    if effort is None or effort == EFFORT_NONE:
        return RecipeEffort()
    if isinstance(effort, str):
        return RecipeEffort(tier=effort)
    if chat_format != "deepseek-v4.1":
        raise UnsupportedSettingError(
            f"SGLang refuses a numeric reasoning_effort on DeepSeek-V4 ({effort!r}: HTTP 400, "
            "'reasoning_effort must be a named tier'); pass low, medium, high, xhigh or max"
        )
    if isinstance(effort, int) and 1 <= effort <= 100:
        return RecipeEffort(tier=BUDGET_TIER, budget=effort)
    if isinstance(effort, float) and 0.0 <= effort <= 0.99:  # a fraction of 100
        return RecipeEffort(tier=BUDGET_TIER, budget=max(1, round(effort * 100)))
    raise UnsupportedSettingError(
        f"SGLang takes reasoning_effort as an integer budget 1-100 or a fraction 0-0.99 on "
        f"DeepSeek-V4.1, not {effort!r} (HTTP 400); pass a budget in range or a name"
    )


def _wire_message(message: Message) -> dict[str, Any]:
    out = message.to_openai()
    if out["role"] == "developer":  # pre_normalize
        out["role"] = "system"
    return out


def sglang_body(
    messages: Sequence[Message],
    *,
    chat_format: str,
    settings: ChatSettings,
    effort: RecipeEffort,
    request: bool = True,
) -> dict[str, Any]:
    """The Chat Completions body SGLang hands recipe for ``messages`` (see the module doc);
    ``request=False``: the start of a longer conversation (a trailing assistant message
    stays one)."""
    wire = [_wire_message(m) for m in messages]
    last = messages[-1] if messages else None
    if request and last is not None and last.role == "assistant":
        wire[-1] = {"role": "user", "content": last.content}
    body: dict[str, Any] = {
        "model": MODEL_NAMES[chat_format],
        "messages": wire,
        "thinking": {"type": "enabled" if settings.thinking else "disabled"},
    }
    if settings.tools:
        body["tools"] = [dict(t) for t in settings.tools]
    if effort.tier is not None:
        body["reasoning_effort"] = effort.tier
    return body


def _reason(error: BaseException) -> str:
    body = getattr(error, "body", None)
    try:
        return str(json.loads(body)["error"]["message"])  # type: ignore[arg-type]
    except (TypeError, ValueError, KeyError):
        return str(body if body is not None else error)


class DeepSeekRecipeFormat:
    """``deepseek-v4`` / ``deepseek-v4.1`` rendered as SGLang renders them (the module doc)."""

    chat = True
    supported_settings = frozenset(SETTING_NAMES) - {"tool_arguments"}
    supported_roles = frozenset(
        {"system", "developer", "user", "assistant", "tool", "latest_reminder"}
    )

    def __init__(self, *, chat_format: str, settings: ChatSettings) -> None:
        if chat_format not in MODEL_NAMES:
            raise UnsupportedSettingError(
                f"renderer='sglang' renders deepseek-v4 and deepseek-v4.1, not {chat_format!r}"
            )
        check_supported(settings, chat_format=chat_format, supported=self.supported_settings)
        refused = [
            ("drop_thinking", settings.drop_thinking is False, "recipe always drops it"),
            ("response_format", settings.response_format is not None, "SGLang sends it to "
             "recipe as the request's response_format, not a schema phaseaware states"),
            ("effort_budgets", settings.effort_budgets not in (None, DEFAULT_TABLE),
             f"recipe's table is {DEFAULT_TABLE}"),
            ("effort_texts", settings.effort_texts not in (None, "0731"),
             "recipe writes the 0731 texts"),
        ]  # fmt: skip
        for name, given, why in refused:
            if given:
                raise UnsupportedSettingError(
                    f"a DeepSeek target served by SGLang does not render {name}="
                    f"{getattr(settings, name)!r} ({why}); leave it unset"
                )
        self.name = chat_format
        self.settings = settings
        self.thinking = settings.thinking
        self.markers: tuple[str, ...] = V4_MARKERS if chat_format == "deepseek-v4" else V41_MARKERS
        self._effort = sglang_effort(chat_format, settings.reasoning_effort)
        recipe = load_recipe()
        self._recipe = recipe
        self._options = recipe.ConversionOptions()
        self._encoding = (
            recipe.DeepseekV4Encoding()
            if chat_format == "deepseek-v4"
            else recipe.DeepseekV41Encoding()
        )
        # rendered once, as SGLang checks its default effort at boot: an effort or a tool
        # schema recipe refuses is refused here, with recipe's reason
        probe = (Message(role="user", content=""),)
        try:
            self._render(probe)
        except MessageContentError as exc:
            raise UnsupportedSettingError(
                f"SGLang refuses these settings for {chat_format} ({exc}); an effort is one "
                "of none, minimal, low, medium, high, xhigh, ultra, max, and a tool's "
                'parameters a JSON Schema object ({"type": "object", ...})'
            ) from None

    def _before_results(self, messages: tuple[Message, ...]) -> str:
        """The start of a conversation that ends with tool calls not answered yet (an
        agent's reply): recipe refuses unanswered calls, so it renders them answered by
        placeholder results and the text is cut where their turn starts."""
        placeholders = tuple(
            Message(role="tool", content=_CUT, tool_call_id=call.id)
            for call in messages[-1].tool_calls
        )
        text = self._render((*messages, *placeholders), request=False)
        return text[: text.rfind(USER, 0, text.index(_CUT))]

    @property
    def rewrites_sent(self) -> bool:
        """Whether appending messages may rewrite text already sent, by recipe's own rules:
        thinking mode drops earlier reasoning when a user or tool message arrives, and V4
        writes every system message at the start of the prompt."""
        return self.thinking or self.name == "deepseek-v4"

    def __repr__(self) -> str:
        return f"DeepSeekRecipeFormat(chat_format={self.name!r}, settings={self.settings!r})"

    def _render(self, messages: Sequence[Message], *, request: bool = True) -> str:
        body = sglang_body(
            messages,
            chat_format=self.name,
            settings=self.settings,
            effort=self._effort,
            request=request,
        )
        recipe = self._recipe
        try:
            converted = recipe.ChatCompletionRequest(body).convert(self._options)
        except (recipe.ConversionError, ValueError) as exc:
            raise MessageContentError(
                f"SGLang (deepseek-recipe) refuses this conversation: {_reason(exc)}"
            ) from None
        text: str = self._encoding.render_conversation(converted.conversation).prompt
        budget = self._effort.budget
        if budget is not None and self.thinking:
            line = BUDGET_LINE.format(budget=BUDGET_TIER_VALUE)
            text = text.replace(line, BUDGET_LINE.format(budget=budget), 1)
        return text

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        """The prompt SGLang renders for ``messages`` with these settings;
        ``add_generation_prompt=False`` renders them as the start of a longer conversation
        (a trailing assistant message stays one) without the closing assistant opener
        (SGLang always writes it). :class:`MessageContentError` with recipe's reason for a
        conversation SGLang refuses."""
        messages = tuple(messages)
        check_roles(messages, chat_format=self.name, roles=self.supported_roles)
        if not add_generation_prompt and messages and messages[-1].tool_calls:
            return self._before_results(messages)
        text = self._render(messages, request=add_generation_prompt)
        if not add_generation_prompt:
            for opener in (ASSISTANT + THINK_OPEN, ASSISTANT + THINK_CLOSE):
                if text.endswith(opener):
                    return text[: -len(opener)]
        return text
