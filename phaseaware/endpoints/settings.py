"""The chat settings every request phaseaware builds states, so no server default renders it.

vLLM's and SGLang's OpenAI servers render a chat request with the model's template and
read its options from ``chat_template_kwargs``. A request that names no thinking setting
gets the server's default, which is not always phaseaware's: vLLM's DeepSeek-V4 and
V4.1 encoders turn thinking on (reasoning effort "high") when neither ``thinking`` nor
``enable_thinking`` is given. So every chat request phaseaware builds (the calibration
backends, ``probe-endpoint``) carries the settings its plan was made with.

Both names are sent: DeepSeek's encoders and DeepSeek-V3.1's template read ``thinking``,
Qwen3's template reads ``enable_thinking``; templates ignore names they do not use.
Formats with no options (``none``, ``chatml``) send nothing, so servers that reject
unknown request fields (OpenAI's own API) are not sent one.

Token-id completions (:func:`phaseaware.endpoints.complete_tokens`) need none: the
server renders nothing there.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SETTINGS_FREE_FORMATS", "chat_template_kwargs"]

#: Chat formats with no rendering options: their requests carry no ``chat_template_kwargs``.
SETTINGS_FREE_FORMATS = frozenset({"none", "chatml"})


def chat_template_kwargs(
    *, chat_format: str, thinking: bool = False, reasoning_effort: str | None = None
) -> dict[str, Any] | None:
    """The ``chat_template_kwargs`` that make a server render as ``chat_format`` with these
    settings; ``None`` for formats without options."""
    if chat_format in SETTINGS_FREE_FORMATS:
        return None
    kwargs: dict[str, Any] = {"thinking": bool(thinking), "enable_thinking": bool(thinking)}
    if reasoning_effort is not None:
        kwargs["reasoning_effort"] = reasoning_effort
    return kwargs
