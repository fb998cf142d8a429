"""Chat settings: everything besides the messages that a request's rendering depends on.

A chat format renders ``(messages, settings)``; a server renders ``(messages,
request fields)``. :class:`ChatSettings` holds the settings once, so the plan
and the request cannot disagree:

- ``thinking``: thinking mode (``<think>`` after the last user turn).
- ``reasoning_effort``: the request's ``reasoning_effort``, any value the target
  server takes for the format (a name, or for V4.1 an integer 1-100). Each format
  maps it as the server does (V4: vLLM's names; V4.1: a budget from the effort
  table, see ``effort_budgets``) and refuses only what the server refuses.
  ``"none"`` is chat mode (thinking off), as in vLLM and SGLang. An effort with
  thinking off renders chat mode (the encoders write the preamble only in
  thinking mode). ``None`` means the *encoder's* default (V4: ``"low"``, no
  preamble; V4.1: ``"high"``), which is NOT the server's default (see below).
- ``effort_budgets``: the name of the V4.1 effort table (effort name -> the
  budget written at the start of the prompt). It is a property of the checkpoint
  and server, not of the request: ``None`` is the table vLLM 0.32 ships
  (``deepseek-v4.1`` format docs list the known ones); ``probe-endpoint``
  detects which one a server uses and records it.
- ``tools``: OpenAI-style tool schemas (``{"type": "function", "function":
  {"name", "description", "parameters"}}``), sent as the request's ``tools``.
- ``response_format``: a JSON schema object the DeepSeek encoders write into
  the system prompt.
- ``drop_thinking``: ``None`` is the encoder's rule (drop earlier reasoning,
  except when tools are present); ``False`` keeps every assistant turn's
  reasoning.
- ``renderer`` (DeepSeek formats): which renderer serves the target. ``None``/``"vllm"``:
  the checkpoint's encoder file as vLLM 0.32 wraps it; ``"sglang"``: DeepSeek's
  reference encoder (``deepseek-recipe``) as SGLang 0.5.23 drives it
  (:mod:`phaseaware.chat.deepseek_recipe`). A property of the server, never sent;
  ``probe-endpoint`` records it.
- ``effort_texts`` (``deepseek-v4``): the checkpoint's reasoning-effort texts.
  ``None``/``"0731"``: DeepSeek-V4-Flash-0731's (what vLLM 0.32 and deepseek-recipe
  write for every V4 checkpoint); ``"preview"``: the first V4 checkpoints' encoder
  (``high`` writes nothing, ``max`` the "Absolute maximum" text).
- ``tool_arguments`` (``hf`` only): how an assistant tool call's ``arguments`` reach
  the Jinja template. ``None``/``"object"``: parsed into a JSON object, as vLLM
  (``renderers/chat_utils.py: _postprocess_messages``), SGLang and llama.cpp's
  ``llama-server`` pass them; ``"string"``: the JSON text as sent, as
  llama-cpp-python and ``apply_chat_template`` over OpenAI-style messages do.

Each chat format declares the settings it renders (``supported_settings``)
and refuses the others with :class:`UnsupportedSettingError`.
:meth:`ChatSettings.chat_template_kwargs` gives the ``chat_template_kwargs`` a
vLLM or SGLang server needs to render exactly what the format renders.

Server defaults, measured in vLLM 0.32 (``vllm/tokenizers/deepseek_v4.py`` and
``deepseek_v41.py``): a request that names neither ``thinking`` nor
``enable_thinking`` is rendered with thinking ON and reasoning effort
``"high"`` (:data:`VLLM_DEFAULT_SETTINGS`). phaseaware never relies on them:
``ChatSettings()`` is thinking off, and every request states its settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from phaseaware.errors import InputError

__all__ = [
    "ChatSettings",
    "ChatSettingsError",
    "UnsupportedSettingError",
    "SETTING_NAMES",
    "VLLM_DEFAULT_SETTINGS",
    "check_supported",
]

SETTING_NAMES = (
    "thinking",
    "reasoning_effort",
    "tools",
    "response_format",
    "drop_thinking",
    "effort_budgets",
    "tool_arguments",
    "renderer",
    "effort_texts",
)
#: How an ``hf`` template receives tool-call arguments (:attr:`ChatSettings.tool_arguments`).
TOOL_ARGUMENTS = ("object", "string")
#: The renderers a DeepSeek target may be served by (:attr:`ChatSettings.renderer`).
RENDERERS = ("vllm", "sglang")
#: DeepSeek-V4 checkpoints' effort-text sets (:attr:`ChatSettings.effort_texts`).
EFFORT_TEXTS = ("0731", "preview")
#: The effort that turns thinking off, in vLLM's and SGLang's DeepSeek request handling.
EFFORT_NONE = "none"


class ChatSettingsError(InputError):
    """A chat setting has the wrong type or value (the message names the allowed ones)."""


class UnsupportedSettingError(ChatSettingsError):
    """The chat format does not render a setting that was given (the message names the fix)."""


def _json_copy(value: object, *, where: str) -> Any:
    try:
        return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ChatSettingsError(
            f"{where} must be JSON (dicts, lists, strings, numbers, booleans, null): {exc}"
        ) from None


def _tool(index: int, raw: object) -> dict[str, Any]:
    where = f"tools[{index}]"
    if not isinstance(raw, Mapping):
        raise ChatSettingsError(
            f'{where} must be {{"type": "function", "function": {{"name": ..., '
            f'"parameters": {{...}}}}}}, got {type(raw).__name__}'
        )
    function = raw.get("function")
    if raw.get("type", "function") != "function" or not isinstance(function, Mapping):
        raise ChatSettingsError(
            f'{where} must be an OpenAI tool schema {{"type": "function", "function": '
            '{"name": ..., "parameters": {...}}}'
        )
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ChatSettingsError(f"{where}: function.name must be a non-empty string")
    copied: dict[str, Any] = _json_copy(dict(raw), where=where)
    return copied


@dataclass(frozen=True)
class ChatSettings:
    """What a request's rendering depends on besides its messages (see the module doc).

    Values are validated and copied at construction; ``tools`` and
    ``response_format`` are JSON copies (the caller's objects are never kept).
    """

    thinking: bool = False
    reasoning_effort: str | int | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    response_format: Mapping[str, Any] | None = None
    drop_thinking: bool | None = None
    effort_budgets: str | None = None
    tool_arguments: str | None = None
    renderer: str | None = None
    effort_texts: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.thinking, bool):
            raise ChatSettingsError(
                f"thinking must be true or false, got {self.thinking!r} "
                f"({type(self.thinking).__name__})"
            )
        if self.drop_thinking is not None and not isinstance(self.drop_thinking, bool):
            raise ChatSettingsError(
                f"drop_thinking must be true, false or null, got {self.drop_thinking!r}"
            )
        effort = self.reasoning_effort
        if effort is not None and (isinstance(effort, bool) or not isinstance(effort, str | int)):
            raise ChatSettingsError(
                f"reasoning_effort must be a name (low, medium, high, xhigh, max, none, ...) "
                f"or an integer 1-100 (deepseek-v4.1), got {effort!r}; which names a format "
                "takes is the server's rule (the chat format refuses what the server refuses)"
            )
        if effort == EFFORT_NONE and self.thinking:
            # vLLM's DeepSeek wrappers render "none" in chat mode whatever thinking says
            object.__setattr__(self, "thinking", False)
        if self.effort_budgets is not None and (
            not isinstance(self.effort_budgets, str) or not self.effort_budgets
        ):
            raise ChatSettingsError(
                f"effort_budgets must name an effort table (a string), got {self.effort_budgets!r}"
            )
        if self.tool_arguments is not None and self.tool_arguments not in TOOL_ARGUMENTS:
            raise ChatSettingsError(
                f"tool_arguments must be 'object' (vLLM, SGLang, llama-server) or 'string' "
                f"(llama-cpp-python), got {self.tool_arguments!r}"
            )
        if self.renderer is not None and self.renderer not in RENDERERS:
            raise ChatSettingsError(
                f"renderer must be 'vllm' (the checkpoint's encoder file, as vLLM wraps it) or "
                f"'sglang' (DeepSeek's reference encoder, as SGLang drives it), got "
                f"{self.renderer!r}; `phaseaware probe-endpoint` records the server's"
            )
        if self.effort_texts is not None and self.effort_texts not in EFFORT_TEXTS:
            raise ChatSettingsError(
                f"effort_texts must be '0731' (DeepSeek-V4-Flash-0731, what vLLM and "
                f"deepseek-recipe write) or 'preview' (the first V4 checkpoints), got "
                f"{self.effort_texts!r}"
            )
        tools = self.tools
        if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
            raise ChatSettingsError(
                "tools must be a list of OpenAI tool schemas "
                '[{"type": "function", "function": {...}}]'
            )
        object.__setattr__(self, "tools", tuple(_tool(i, t) for i, t in enumerate(tools)))
        if self.response_format is not None:
            if not isinstance(self.response_format, Mapping):
                raise ChatSettingsError(
                    "response_format must be a JSON object (the schema the reply follows), "
                    f"got {type(self.response_format).__name__}"
                )
            copied = _json_copy(dict(self.response_format), where="response_format")
            object.__setattr__(self, "response_format", copied)
        if self.drop_thinking is True and self.tools:
            raise ChatSettingsError(
                "drop_thinking=True has no effect with tools: DeepSeek's encoder keeps every "
                "turn's reasoning when tools are present; leave drop_thinking unset"
            )

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON (every field, defaults included; ``effort_budgets``,
        ``tool_arguments``, ``renderer`` and ``effort_texts`` only when set, so documents written before they existed read
        back unchanged)."""
        out: dict[str, Any] = {
            "thinking": self.thinking,
            "reasoning_effort": self.reasoning_effort,
            "tools": [dict(t) for t in self.tools],
            "response_format": None if self.response_format is None else dict(self.response_format),
            "drop_thinking": self.drop_thinking,
        }
        if self.effort_budgets is not None:
            out["effort_budgets"] = self.effort_budgets
        for name in ("tool_arguments", "renderer", "effort_texts"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ChatSettings:
        """Settings from JSON; unknown keys are an error."""
        if not isinstance(raw, Mapping):
            raise ChatSettingsError(
                f"chat settings must be a JSON object, got {type(raw).__name__}"
            )
        unknown = sorted(set(raw) - set(SETTING_NAMES))
        if unknown:
            raise ChatSettingsError(
                f"unknown chat settings {unknown}; known: {', '.join(SETTING_NAMES)}"
            )
        return cls(**{k: raw[k] for k in SETTING_NAMES if k in raw})

    def given(self) -> frozenset[str]:
        """Names of the settings that differ from their defaults."""
        default = ChatSettings()
        return frozenset(
            f.name for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)
        )

    def tool_functions(self) -> tuple[dict[str, Any], ...]:
        """Each tool's ``function`` object (what DeepSeek's encoders write), as a copy."""
        return tuple(dict(t["function"]) for t in self.tools)

    def chat_template_kwargs(self, chat_format: str) -> dict[str, Any]:
        """The ``chat_template_kwargs`` that make a vLLM/SGLang server render what the
        chat format ``chat_format`` renders with these settings.

        The request's ``tools`` field carries :attr:`tools` (the server attaches
        them to the first system message, as the format does). vLLM's DeepSeek
        tokenizer modes read ``thinking``/``enable_thinking``, ``reasoning_effort``
        and ``drop_thinking``; both thinking names are sent, since vLLM sets
        ``enable_thinking`` itself from a request-level ``reasoning_effort``
        (``ChatCompletionRequest.build_chat_params`` in
        ``vllm/entrypoints/openai/chat_completion/protocol.py``) unless the kwargs name it.
        A request-level ``reasoning_effort`` (LangChain's standard parameter) replaces the
        one sent here; the plan is exact when both are the same value.
        ``effort_budgets`` and ``tool_arguments`` are not sent: they describe the
        server (its effort table, how it hands arguments to the template).
        Raises :class:`UnsupportedSettingError` for ``response_format`` with a
        DeepSeek format: vLLM 0.32 does not pass it to the encoder.
        """
        thinking = {"thinking": self.thinking, "enable_thinking": self.thinking}
        if chat_format in ("deepseek-v4", "deepseek-v4.1"):
            if self.response_format is not None:
                raise UnsupportedSettingError(
                    f"a server in {chat_format} mode does not render response_format (vLLM "
                    "passes it to structured decoding only); write the schema into your "
                    "system message, or leave response_format unset"
                )
            out: dict[str, Any] = dict(thinking)
            if self.renderer == "sglang":
                # SGLang reads thinking from chat_template_kwargs.thinking, and the effort
                # from the request's reasoning_effort, which the kwargs' one replaces
                # (serving_chat.py: _convert_to_internal_request; integer budgets travel
                # only this way). Unset in thinking mode is stated as recipe's default,
                # "high", so no server default (SGLANG_DSV4*_REASONING_EFFORT) renders it.
                if self.reasoning_effort is not None or self.thinking:
                    out["reasoning_effort"] = (
                        "high" if self.reasoning_effort is None else self.reasoning_effort
                    )
                return out
            if self.reasoning_effort is not None:
                # the value as given: the server maps it as the format does
                out["reasoning_effort"] = self.reasoning_effort
            elif self.thinking:
                # state the encoder's own default explicitly (the server's is "high")
                out["reasoning_effort"] = "low" if chat_format == "deepseek-v4" else "high"
            out["drop_thinking"] = self.drop_thinking is not False
            return out
        if chat_format == "hf":
            return dict(thinking)
        return {}


#: What vLLM 0.32 renders for a DeepSeek-V4/V4.1 request that names no thinking
#: setting (``vllm/tokenizers/deepseek_v4.py``, ``deepseek_v41.py``): thinking on,
#: effort "high". Recorded for probes and docs; never used as phaseaware's default.
VLLM_DEFAULT_SETTINGS = ChatSettings(thinking=True, reasoning_effort="high")


def check_supported(settings: ChatSettings, *, chat_format: str, supported: frozenset[str]) -> None:
    """Raise :class:`UnsupportedSettingError` for a given setting the format cannot render."""
    missing = sorted(settings.given() - supported)
    if missing:
        raise UnsupportedSettingError(
            f"chat format {chat_format!r} does not render {', '.join(missing)}; use chat "
            "format deepseek-v4.1 (it renders every chat setting; deepseek-v4 all but "
            f"effort_budgets), or leave {', '.join(missing)} unset"
        )
