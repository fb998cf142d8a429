"""The chat settings every request phaseaware builds states, so no server default renders it.

vLLM's and SGLang's OpenAI servers render a chat request with the model's template and
read its options from ``chat_template_kwargs``. A request that names no thinking setting
gets the server's default, which is not always phaseaware's: vLLM's DeepSeek-V4 and
V4.1 encoders turn thinking on (reasoning effort "high") when neither ``thinking`` nor
``enable_thinking`` is given. So every chat request phaseaware builds (the calibration
backends, ``probe-endpoint``) carries the settings its plan was made with.

The kwargs are :meth:`phaseaware.chat.ChatSettings.chat_template_kwargs`'s (both
thinking names; for DeepSeek formats also the effort and ``drop_thinking``).
Formats with no options (``none``, ``chatml``) send nothing, so servers that reject
unknown request fields (OpenAI's own API) are not sent one.

:func:`record_settings` is the one rule for what a request to a probed endpoint is
rendered with: the record's ``thinking`` when the request states it, the server's
default (``server_default``) when it states nothing; for ``deepseek-v4.1`` with the
effort table the probe found (``effort_budgets``: the checkpoint's, never sent).

Token-id completions (:func:`phaseaware.endpoints.complete_tokens`) need none: the
server renders nothing there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from phaseaware.chat import ChatSettings
from phaseaware.errors import InputError

if TYPE_CHECKING:
    from phaseaware.endpoints.record import EndpointRecord

__all__ = ["SETTINGS_FREE_FORMATS", "chat_template_kwargs", "record_settings"]

#: Chat formats with no rendering options: their requests carry no ``chat_template_kwargs``.
SETTINGS_FREE_FORMATS = frozenset({"none", "chatml"})


def chat_template_kwargs(
    *, chat_format: str, thinking: bool = False, reasoning_effort: str | None = None
) -> dict[str, Any] | None:
    """The ``chat_template_kwargs`` that make a server render as ``chat_format`` with these
    settings; ``None`` for formats without options."""
    if chat_format in SETTINGS_FREE_FORMATS:
        return None
    settings = ChatSettings(thinking=bool(thinking), reasoning_effort=reasoning_effort)
    return settings.chat_template_kwargs(chat_format) or None


def record_settings(record: EndpointRecord, *, state_settings: bool = True) -> ChatSettings:
    """The chat settings a request to ``record``'s endpoint is rendered with: the record's
    ``thinking`` when the request states it, else the server's default the probe found
    (``server_default``; ``InputError`` when the record has none: a count-mode record,
    or a default phaseaware cannot render)."""
    # the V4.1 effort table the probe found is the server's: every plan renders with it
    table = record.effort_budgets if record.chat_format == "deepseek-v4.1" else None
    # and so is how it hands tool-call arguments to an hf template
    arguments = record.tool_arguments if record.chat_format == "hf" else None
    if state_settings:
        return ChatSettings(
            thinking=bool(record.thinking), effort_budgets=table, tool_arguments=arguments
        )
    default = record.server_default
    if not default or not default.get("matched") or default.get("thinking") is None:
        raise InputError(
            f"the endpoint record for {record.model!r} at {record.base_url} holds no server "
            "default phaseaware can render (probe-endpoint finds it in exact mode); let the "
            "requests state the chat settings (adapters: state_settings=True; request files: "
            "drop options.server_default), or rerun "
            "`phaseaware probe-endpoint --mode exact`"
        )
    return ChatSettings(
        thinking=bool(default["thinking"]),
        reasoning_effort=default.get("reasoning_effort"),
        effort_budgets=table,
        tool_arguments=arguments,
    )
