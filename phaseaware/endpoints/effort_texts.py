"""Which DeepSeek-V4 effort texts a server writes: the checkpoint's encoder decides.

DeepSeek-V4-Flash-0731 changed the reasoning-effort texts (``low``: none; ``high``: the
text the first V4 checkpoints wrote for ``max``; ``max``: a new one;
:data:`phaseaware.chat.deepseek_v4.EFFORT_TEXTS`). vLLM 0.32 and deepseek-recipe (SGLang
0.5.23) write the 0731 texts for every V4 checkpoint; a server that runs the checkpoint's
own encoder file writes that checkpoint's. The texts of ``high`` differ in length, so one
request tells them apart by its count (or its ids) alone.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from phaseaware.chat import ChatSettings
from phaseaware.chat.deepseek_v4 import EFFORT_TEXTS
from phaseaware.endpoints.prompts import ProbePrompt, probe_prompts
from phaseaware.errors import PhaseawareWarning
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["EFFORT_PROBE", "effort_texts_of"]

#: the request that tells the texts apart: thinking on, effort ``high``
EFFORT_PROBE = ChatSettings(thinking=True, reasoning_effort="high")


def effort_texts_of(
    *,
    tokenizer: Tokenizer,
    offset: int,
    count: Callable[[ProbePrompt], int],
    where: str,
    exact: bool,
) -> str | None:
    """The effort texts (``"0731"``, ``"preview"``) whose render of :data:`EFFORT_PROBE`
    the server counted (``count``: its ``usage.prompt_tokens`` for a prompt sent with
    EFFORT_PROBE's ``chat_template_kwargs``, ``offset`` tokens of its own); ``None`` and a
    warning when neither does. ``exact``: the probe saw the server honour the thinking
    setting by its ids; otherwise a count that matches ``preview`` (no text for ``high``)
    is also what a server ignoring the settings counts, and gives ``None``."""
    renders = {
        name: probe_prompts(
            tokenizer, "deepseek-v4", settings=ChatSettings(
                thinking=True, reasoning_effort="high", effort_texts=name
            ),
        )[1]
        for name in EFFORT_TEXTS
    }  # fmt: skip
    counted = count(renders["0731"])
    for name, prompt in renders.items():
        if counted == len(prompt.ids) + offset:
            return name if exact or name == "0731" else None
    warnings.warn(
        f"{where} counted {counted - offset} tokens for a DeepSeek-V4 thinking prompt with "
        f"effort 'high', which no known effort texts ({', '.join(EFFORT_TEXTS)}) give; plans "
        "with reasoning effort may be off there",
        PhaseawareWarning,
        stacklevel=3,
    )
    return None
