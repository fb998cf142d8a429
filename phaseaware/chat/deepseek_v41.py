"""DeepSeek-V4.1 chat encoding (``deepseek-v4.1``): V4's steps in the V4.1 dialect.

Source: DeepSeek's V4.1 reference encoder as vLLM 0.32 carries it
(``vllm/tokenizers/deepseek_v41_encoding.py``; request handling in
``vllm/tokenizers/deepseek_v41.py``, tokenizer mode ``deepseek_v41``). The steps
are re-implemented in :mod:`phaseaware.chat.deepseek_encoding`; this module owns
the V4.1 markers and dialect. What differs from :mod:`phaseaware.chat.deepseek_v4`:

- **A system token.** ``<｜System｜>`` opens the conversation when the first turn
  is a system message or in thinking mode (where the reasoning-effort preamble
  follows it), and opens every system message after the first turn.
- **Numeric reasoning effort.** In thinking mode the preamble is ``"Reasoning
  Effort: N (range 1-100, the higher the value, the more thorough the
  reasoning)\\n\\n"`` with N from :data:`EFFORT_BUDGETS` (``low`` 50, ``high``
  75, ``xhigh`` 75, ``max`` 100) or an integer 1-100 given directly. Unset means
  ``high`` (the encoder's default, and vLLM's).
- **Mid-conversation system messages act as user turns:** they count as the last
  user turn for ``drop_thinking`` and are followed by the assistant transition
  (when an assistant or latest_reminder turn, or nothing, follows); a first-turn
  system message never is.
- **DSML tag names** carry a space: ``<｜DSML｜ calls>``, ``<｜DSML｜ invoke
  name="...">``, ``<｜DSML｜ parameter name="..." string="...">`` (also in the
  tools section).
- Tool results are content blocks of the merged user turn, exactly as in V4 for
  text content (the encoder also takes lists of text parts; phaseaware's messages
  hold text).

- **No ``latest_reminder`` role**: the encoder has it, but vLLM's request path
  for V4.1 refuses it, so this format refuses it too (``UnknownRoleError``).

Everything else (tool schemas on the first system message, ``response_format``,
the developer role, tool-result ordering, ``drop_thinking``,
``add_generation_prompt=False``) is as documented for V4.
"""

from __future__ import annotations

from phaseaware.chat.deepseek_encoding import (
    DSML,
    THINK_CLOSE,
    THINK_OPEN,
    TOOL_RESULT_CLOSE,
    TOOL_RESULT_OPEN,
    DeepSeekFormat,
    Dialect,
)
from phaseaware.chat.deepseek_v4 import ASSISTANT, BOS, EOS, LATEST_REMINDER, USER

__all__ = ["DeepSeekV41Format", "DIALECT", "MARKERS", "EFFORT_BUDGETS", "SYSTEM"]

SYSTEM = "<｜System｜>"

#: reasoning_effort names -> the budget written in the preamble
EFFORT_BUDGETS: dict[str, int] = {"low": 50, "high": 75, "xhigh": 75, "max": 100}
DEFAULT_EFFORT = "high"  # the encoder's and vLLM's

#: Every control string the V4.1 encoding writes; message text never holds one.
MARKERS: tuple[str, ...] = (
    BOS,
    EOS,
    SYSTEM,
    USER,
    ASSISTANT,
    LATEST_REMINDER,
    THINK_OPEN,
    THINK_CLOSE,
    DSML,
    TOOL_RESULT_OPEN,
    TOOL_RESULT_CLOSE,
)


def _preamble(effort: str | int | None) -> str:
    if effort is None:
        effort = DEFAULT_EFFORT
    budget = EFFORT_BUDGETS[effort] if isinstance(effort, str) else effort
    return (
        f"Reasoning Effort: {budget} (range 1-100, the higher the value, the more thorough "
        "the reasoning)\n\n"
    )


DIALECT = Dialect(
    name="deepseek-v4.1",
    bos=BOS,
    eos=EOS,
    user=USER,
    assistant=ASSISTANT,
    latest_reminder=LATEST_REMINDER,
    system=SYSTEM,
    calls_tag=" calls",
    invoke_tag=" invoke",
    parameter_tag=" parameter",
    efforts=tuple(EFFORT_BUDGETS),
    int_efforts=True,
    preamble=_preamble,
    mid_system_opens_turn=True,
    markers=MARKERS,
)


class DeepSeekV41Format(DeepSeekFormat):
    """DeepSeek-V4.1's chat encoding (see the module docstring)."""

    name = "deepseek-v4.1"
    dialect = DIALECT
    # the encoder writes latest_reminder turns, but vLLM's deepseek_v41 mode refuses the
    # role (HTTP 400): refused here too, so a plan never holds what no server accepts
    supported_roles = frozenset({"system", "developer", "user", "assistant", "tool"})
