"""DeepSeek-V4 chat encoding: every message role and chat setting the official encoder renders.

Source: DeepSeek's official encoder ``encoding/encoding_dsv4.py`` shipped with the
DeepSeek-V4 model repositories (``deepseek-ai/DeepSeek-V4-Flash``; vLLM 0.32 carries
it as ``vllm/tokenizers/deepseek_v4_encoding.py``, and its request handling, which
attaches tools and maps ``reasoning_effort``, as ``vllm/tokenizers/deepseek_v4.py``).
This module owns the V4 markers and names the V4 dialect; the steps are
re-implemented in :mod:`phaseaware.chat.deepseek_encoding` (shared with V4.1). The
test suite checks it against an independent transliteration of the encoder, and
``scripts/compare_dsv4_encoder.py`` against vLLM's copy.

What the encoder does, in order (``ChatSettings`` supplies the settings):

0. **Tools and response format** (``settings.tools``, ``settings.response_format``)
   attach to the FIRST system message, wherever it is; a system message with
   empty content is put first when there is none. That system text is followed
   by ``"\n\n## Tools ..."`` (the DSML calling convention, then each tool's
   ``function`` object as JSON, one per line) and by ``"\n\n## Response
   Format: ..."`` with the schema as JSON. (vLLM attaches request tools this way;
   it passes ``response_format`` to structured decoding only, so phaseaware's
   placement of it follows the tools.) When tools are given, ``drop_thinking``
   is off (the encoder's rule; ``drop_thinking=True`` with tools is refused).
1. **Tool results become user turns.** There is no tool role in V4: each tool
   message becomes a ``<tool_result>{content}</tool_result>`` block, and runs of
   consecutive user and tool messages merge into ONE user turn whose blocks are
   joined by ``"\n\n"``. Within a turn, tool results are stably reordered by the
   position of their ``tool_call_id`` among the tool calls of the latest
   assistant turn that made calls (unknown ids sort as position 0).
2. **Turns.** ``BOS`` once; in thinking mode the reasoning-effort preamble
   (:data:`EFFORT_PREAMBLES`: ``low`` or unset writes nothing, ``high`` and
   ``max`` a paragraph) before the first turn; then: system -> its content
   verbatim (+ schemas); developer -> ``<｜User｜>`` + content (content
   required); user -> ``<｜User｜>`` + blocks; latest_reminder ->
   ``<｜latest_reminder｜>`` + content; assistant -> ``[reasoning + "</think>"] +
   content + [tool calls] + <｜end▁of▁sentence｜>``, where tool calls are
   ``"\n\n<｜DSML｜tool_calls>\n" + invokes + "\n</｜DSML｜tool_calls>"``, each
   invoke ``<｜DSML｜invoke name="NAME">\n`` + one
   ``<｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>`` per
   argument (strings verbatim, other values as JSON) + ``\n</｜DSML｜invoke>``.
3. **Transitions.** A turn followed by anything but an assistant or
   latest_reminder turn gets none. Otherwise a user or developer turn, and a
   system turn that is the last or is followed by an assistant turn, is closed
   by ``<｜Assistant｜>`` plus ``</think>`` (non-thinking) or ``<think>``
   (thinking: only after the LAST user/developer turn when ``drop_thinking``,
   after every such turn otherwise).
4. **Earlier reasoning is dropped** (thinking with ``drop_thinking``, the
   encoder's default): developer turns before the last user turn are left out,
   assistant turns before it lose their reasoning and ``</think>``; those after
   it keep ``reasoning + </think>``. Non-thinking mode never writes reasoning.

``reasoning_effort`` takes every value vLLM's V4 request handling takes, mapped
as it maps them (:func:`server_effort`, after ``apply_chat_template`` of
``get_deepseek_v4_tokenizer`` in ``vllm/tokenizers/deepseek_v4.py``): ``minimal``,
``low``, ``medium`` -> ``low``; ``max`` -> ``max``; ``none`` -> chat mode; any
other name (``high``, ``xhigh``, ...) and any non-string -> ``high``. The encoder
itself takes only ``low``, ``high``, ``max``. The server default differs from
the encoder's: see :data:`phaseaware.chat.settings.VLLM_DEFAULT_SETTINGS`.
SGLang maps V4 efforts otherwise (only ``high`` and ``max`` reach its encoder:
``resolve_v4_reasoning_effort`` in ``sglang/srt/entrypoints/openai/reasoning_request.py``);
see docs/servers.md. ``effort_budgets`` is V4.1's; this format refuses it. Not supported: task
tokens, ``wo_eos``, image parts. One extension: ``add_generation_prompt=False``
omits the final transition (the encoder always writes it).

Message text is written verbatim (the encoder escapes nothing); control strings
in it are broken or refused before rendering (:mod:`phaseaware.chat.untrusted`).

Prefix stability (what append alignment relies on): appending messages leaves
the earlier text byte-identical except (a) a user or tool message appended
directly after a user/tool message joins that turn, replacing the closing
transition by ``"\n\n"``; (b) in thinking mode with ``drop_thinking``, a new
user or tool message makes the previous last user turn non-last, which turns
its ``<think>`` into ``</think>`` and drops the reasoning of the assistant turns
after it. Non-thinking mode after an assistant message is always stable.
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
from phaseaware.chat.settings import EFFORT_NONE, SETTING_NAMES, ChatSettings

__all__ = [
    "DeepSeekV4Format",
    "DIALECT",
    "MARKERS",
    "EFFORT_PREAMBLES",
    "EFFORT_TEXTS",
    "LOW_NAMES",
    "server_effort",
    "BOS",
    "EOS",
    "USER",
    "ASSISTANT",
    "LATEST_REMINDER",
    "THINK_OPEN",
    "THINK_CLOSE",
    "DSML",
]

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
LATEST_REMINDER = "<｜latest_reminder｜>"

#: The reasoning-effort preamble written before the first turn in thinking mode.
EFFORT_PREAMBLES: dict[str, str] = {
    "low": "",
    "high": (
        "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
        "You MUST be very thorough in your thinking and comprehensively decompose the "
        "problem to resolve the root cause, rigorously stress-testing your logic against "
        "all potential paths, edge cases, and adversarial scenarios.\n"
        "Explicitly write out your entire deliberation process, documenting every "
        "intermediate step, considered alternative, and rejected hypothesis to ensure "
        "absolutely no assumption is left unchecked.\n\n"
    ),
    "max": (
        "Reasoning Effort: Beyond maximum \u2014 exhaustive, relentless, and uncompromising.\n"
        "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to "
        "chance: exhaustively decompose the problem into its most fundamental components, "
        "trace every causal chain to its root, and resolve the underlying cause rather than "
        "any surface symptom.\n"
        "Do not stop reasoning until you have independently verified the solution from "
        "multiple angles and are certain that no assumption remains unchecked and no error "
        "remains undiscovered.\n\n"
    ),
}
DEFAULT_EFFORT = "low"  # the encoder's (vLLM's server default is "high")

#: The effort texts by checkpoint (``ChatSettings(effort_texts=...)``): ``"0731"`` is
#: DeepSeek-V4-Flash-0731's encoder (:data:`EFFORT_PREAMBLES`; vLLM 0.32 and deepseek-recipe
#: write it for every V4 checkpoint); ``"preview"`` the first V4 checkpoints' encoder
#: (``REASONING_EFFORT_MAX`` only: ``max`` writes what 0731 calls ``high``).
EFFORT_TEXTS: dict[str, dict[str, str]] = {
    "0731": EFFORT_PREAMBLES,
    "preview": {"low": "", "high": "", "max": EFFORT_PREAMBLES["high"]},
}

#: Every control string the V4 encoding writes; message text never holds one.
MARKERS: tuple[str, ...] = (
    BOS,
    EOS,
    USER,
    ASSISTANT,
    LATEST_REMINDER,
    THINK_OPEN,
    THINK_CLOSE,
    DSML,
    TOOL_RESULT_OPEN,
    TOOL_RESULT_CLOSE,
)


#: The request values vLLM maps to the encoder's "low" (every other name is "high").
LOW_NAMES = ("minimal", "low", "medium")


def server_effort(effort: str | int | None) -> str:
    """The encoder effort vLLM 0.32 renders for a request's ``reasoning_effort`` in
    thinking mode (``_DeepseekV4Tokenizer.apply_chat_template`` in
    ``vllm/tokenizers/deepseek_v4.py``); ``None`` is the encoder's default, which
    phaseaware's requests state (``"low"``). Never refuses: the server takes any value."""
    if effort is None or effort == EFFORT_NONE:
        return DEFAULT_EFFORT
    if not isinstance(effort, str):
        return "high"
    if effort == "max":
        return "max"
    return "low" if effort in LOW_NAMES else "high"


def _preamble(settings: ChatSettings) -> str:
    texts = EFFORT_TEXTS[settings.effort_texts or "0731"]
    return texts[server_effort(settings.reasoning_effort)]


DIALECT = Dialect(
    name="deepseek-v4",
    bos=BOS,
    eos=EOS,
    user=USER,
    assistant=ASSISTANT,
    latest_reminder=LATEST_REMINDER,
    system=None,
    calls_tag="tool_calls",
    invoke_tag="invoke",
    parameter_tag="parameter",
    preamble=_preamble,
    mid_system_opens_turn=False,
    markers=MARKERS,
)


class DeepSeekV4Format(DeepSeekFormat):
    """DeepSeek-V4's official chat encoding (see the module docstring)."""

    name = "deepseek-v4"
    dialect = DIALECT
    supported_settings = frozenset(SETTING_NAMES) - {"effort_budgets", "tool_arguments"}
