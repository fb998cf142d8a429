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
  reasoning)\\n\\n"`` with N from the effort table or an integer 1-100 given
  directly. Unset means ``high`` (the encoder's default, and vLLM's); ``none`` is
  chat mode. vLLM refuses any other value, in chat mode too (HTTP 400:
  ``_DeepseekV41Tokenizer.apply_chat_template`` in ``vllm/tokenizers/deepseek_v41.py``),
  and so does this format, naming the values it takes.
- **The effort table is the checkpoint's.** The names map to budgets by a table
  that differs between V4.1 snapshots and servers (:data:`EFFORT_TABLES`, chosen
  with ``ChatSettings(effort_budgets=...)``): ``low50-high75`` (the default) is
  ``REASONING_EFFORT_MAPPINGS`` in vLLM 0.32's ``vllm/tokenizers/deepseek_v41_encoding.py``
  (``low`` 50, ``high`` 75, ``xhigh`` 75, ``max`` 100); ``low25-high50`` is
  SGLang's (``REASONING_EFFORT_MAPPINGS`` in
  ``sglang/srt/entrypoints/openai/encoding_dsv41.py``: ``low`` 25, ``high`` 50,
  ``xhigh`` 75, ``max`` 100). Every budget is one token in DeepSeek's tokenizer,
  so a table changes token ids, never the count: ``probe-endpoint`` tells them
  apart by the server's ids (exact mode) and records the table.
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
from phaseaware.chat.settings import EFFORT_NONE, ChatSettings, UnsupportedSettingError

__all__ = [
    "DeepSeekV41Format",
    "DIALECT",
    "MARKERS",
    "EFFORT_BUDGETS",
    "EFFORT_TABLES",
    "DEFAULT_TABLE",
    "SYSTEM",
    "effort_budget",
    "effort_table",
]

SYSTEM = "<｜System｜>"

#: Known effort tables (reasoning_effort name -> the budget written in the preamble), by
#: name; a V4.1 checkpoint's server uses one (see the module docstring for the sources).
EFFORT_TABLES: dict[str, dict[str, int]] = {
    "low50-high75": {"low": 50, "high": 75, "xhigh": 75, "max": 100},  # vLLM 0.32
    "low25-high50": {"low": 25, "high": 50, "xhigh": 75, "max": 100},  # SGLang
}
DEFAULT_TABLE = "low50-high75"
#: The default table (vLLM 0.32's).
EFFORT_BUDGETS: dict[str, int] = EFFORT_TABLES[DEFAULT_TABLE]
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


def effort_table(name: str | None) -> dict[str, int]:
    """The effort table ``name`` (``None``: the default); ``UnsupportedSettingError``
    naming the known tables otherwise."""
    table = EFFORT_TABLES.get(DEFAULT_TABLE if name is None else name)
    if table is None:
        raise UnsupportedSettingError(
            f"effort_budgets {name!r} is not a known DeepSeek-V4.1 effort table; known: "
            f"{', '.join(EFFORT_TABLES)} (`phaseaware probe-endpoint` finds the one a server uses)"
        )
    return dict(table)


def effort_budget(effort: str | int | None, *, table: str | None = None) -> int | None:
    """The budget the server writes for ``reasoning_effort`` (``None`` for ``"none"``:
    chat mode), or ``UnsupportedSettingError`` naming the values it takes."""
    budgets = effort_table(table)
    if effort == EFFORT_NONE:
        return None
    if effort is None:
        effort = DEFAULT_EFFORT
    if isinstance(effort, str) and effort in budgets:
        return budgets[effort]
    if type(effort) is int and 1 <= effort <= 100:
        return effort
    raise UnsupportedSettingError(
        f"chat format 'deepseek-v4.1' takes reasoning_effort {', '.join(budgets)}, "
        f"{EFFORT_NONE} or an integer 1-100, not {effort!r} (vLLM refuses it with HTTP 400); "
        "pick one of those"
    )


def _preamble(settings: ChatSettings) -> str:
    budget = effort_budget(settings.reasoning_effort, table=settings.effort_budgets)
    if budget is None:
        return ""
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
