"""The probe conversations: tiny prompts rendered and tokenized as phaseaware sends them.

Each probe holds filler units (0..8) in its context slot before the question, so
prompts differ by known token counts (count mode) and their ids can be compared
with a server's (exact mode). Pure: no HTTP (:mod:`phaseaware.endpoints.probe` sends them).
"""

from __future__ import annotations

from dataclasses import dataclass

from phaseaware.assembly.prepare.filler import filler_unit
from phaseaware.chat import ChatFormat, ChatSettings, conversation_layout, get_chat_format
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["EFFORTS", "PROBE_QUESTION", "PROBE_UNITS", "ProbePrompt", "probe_prompts"]

PROBE_QUESTION = "Reply with one word."
PROBE_UNITS = (0, 1, 2, 3, 5, 8)  # filler units before the end of the context slot
#: the effort names a server default is looked for among (every name a DeepSeek encoder knows)
EFFORTS = ("low", "high", "xhigh", "max")


@dataclass(frozen=True)
class ProbePrompt:
    """One probe: its messages (or completion text) and phaseaware's token ids."""

    units: int  # filler units in the context
    text: str
    messages: tuple[dict[str, str], ...] | None  # None: a plain completion prompt
    ids: tuple[int, ...]


def probe_prompts(
    tokenizer: Tokenizer,
    chat_format: str,
    *,
    thinking: bool = False,
    settings: ChatSettings | None = None,
) -> tuple[ProbePrompt, ...]:
    """The probe prompts, rendered and tokenized as phaseaware would send them
    (``settings``: render with these chat settings instead of ``thinking``)."""
    fmt: str | ChatFormat = chat_format
    if settings is not None:
        fmt = get_chat_format(chat_format, tokenizer, settings=settings)
    layout = conversation_layout(tokenizer=tokenizer, chat_format=fmt, thinking=thinking)
    unit = filler_unit(tokenizer, period=8, default=" .")  # each probe is re-tokenized whole
    prompts = []
    for k in PROBE_UNITS:
        rendered = layout.render(
            system=None, context="Probe context:" + unit * k, question=PROBE_QUESTION
        )
        prompts.append(
            ProbePrompt(k, rendered.text, rendered.messages, tuple(tokenizer.encode(rendered.text)))
        )
    return tuple(prompts)
