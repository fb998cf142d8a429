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
default (``server_default``) when it states nothing; for DeepSeek formats with the
server's renderer (``renderer``: SGLang renders through deepseek-recipe), V4's effort
texts and V4.1's effort table the probe found (the server's and checkpoint's, never sent).

Token-id completions (:func:`phaseaware.endpoints.complete_tokens`) need none: the
server renders nothing there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from phaseaware.chat import ChatSettings
from phaseaware.errors import InputError

if TYPE_CHECKING:
    from phaseaware.endpoints.record import EndpointRecord

__all__ = [
    "SETTINGS_FREE_FORMATS",
    "ServerSettings",
    "chat_template_kwargs",
    "deepseek_server_settings",
    "record_settings",
]

#: Chat formats with no rendering options: their requests carry no ``chat_template_kwargs``.
SETTINGS_FREE_FORMATS = frozenset({"none", "chatml"})


def chat_template_kwargs(
    *,
    chat_format: str,
    thinking: bool = False,
    reasoning_effort: str | None = None,
    renderer: str | None = None,
) -> dict[str, Any] | None:
    """The ``chat_template_kwargs`` that make a server render as ``chat_format`` with these
    settings (``renderer``: the server's, for DeepSeek formats); ``None`` for formats
    without options."""
    if chat_format in SETTINGS_FREE_FORMATS:
        return None
    settings = ChatSettings(
        thinking=bool(thinking), reasoning_effort=reasoning_effort, renderer=renderer
    )
    return settings.chat_template_kwargs(chat_format) or None


class ServerSettings(TypedDict):
    """The chat settings that describe a server, not a request (never sent)."""

    renderer: str | None
    effort_texts: str | None
    effort_budgets: str | None


def deepseek_server_settings(record: EndpointRecord) -> ServerSettings:
    """The DeepSeek settings that describe ``record``'s server, not a request: its
    renderer, V4's effort texts, V4.1's effort table (all ``None`` for other formats)."""
    deepseek = record.chat_format in ("deepseek-v4", "deepseek-v4.1")
    return ServerSettings(
        renderer=record.renderer if deepseek else None,
        effort_texts=record.effort_texts if record.chat_format == "deepseek-v4" else None,
        effort_budgets=record.effort_budgets if record.chat_format == "deepseek-v4.1" else None,
    )


def record_settings(record: EndpointRecord, *, state_settings: bool = True) -> ChatSettings:
    """The chat settings a request to ``record``'s endpoint is rendered with: the record's
    ``thinking`` when the request states it, else the server's default the probe found
    (``server_default``; ``InputError`` when the record has none: a count-mode record,
    or a default phaseaware cannot render)."""
    # the renderer, effort texts and V4.1 effort table the probe found are the server's:
    # every plan renders with them
    server = deepseek_server_settings(record)
    # and so is how it hands tool-call arguments to an hf template
    arguments = record.tool_arguments if record.chat_format == "hf" else None
    if state_settings:
        return ChatSettings(thinking=bool(record.thinking), tool_arguments=arguments, **server)
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
        tool_arguments=arguments,
        **server,
    )
