"""Slow reference renders of DeepSeek-V4 and V4.1, transliterated for the tests.

Written from DeepSeek's official encoders as vLLM 0.32 carries them
(``vllm/tokenizers/deepseek_v4_encoding.py``, ``deepseek_v41_encoding.py``) and
their request wrappers (``deepseek_v4.py``, ``deepseek_v41.py``: tools attach to
the first system message), dict-based and message by message as the encoders go
(``merge_tool_messages``, ``sort_tool_results_by_call_order``,
``_drop_thinking_messages``, ``render_message``, ``encode_messages``). It shares
no code with ``phaseaware.chat``: the package's formats are checked against it.

``response_format`` follows the tools (first system message, synthesised when
none), phaseaware's documented choice (vLLM does not render it).
"""

from __future__ import annotations

import copy
import json
from typing import Any

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT, SYSTEM = "<｜User｜>", "<｜Assistant｜>", "<｜System｜>"
REMINDER, DSML = "<｜latest_reminder｜>", "｜DSML｜"

V4_EFFORT = {
    "low": "",
    "high": "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\nExplicitly write out your entire deliberation "
    "process, documenting every intermediate step, considered alternative, and rejected "
    "hypothesis to ensure absolutely no assumption is left unchecked.\n\n",
    "max": "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: "
    "exhaustively decompose the problem into its most fundamental components, trace every "
    "causal chain to its root, and resolve the underlying cause rather than any surface "
    "symptom.\nDo not stop reasoning until you have independently verified the solution from "
    "multiple angles and are certain that no assumption remains unchecked and no error "
    "remains undiscovered.\n\n",
}
V41_BUDGET = {"low": 50, "high": 75, "xhigh": 75, "max": 100}
# V4.1 effort tables: vLLM 0.32's deepseek_v41_encoding.py, SGLang's encoding_dsv41.py
V41_TABLES = {
    "low50-high75": V41_BUDGET,
    "low25-high50": {"low": 25, "high": 50, "xhigh": 75, "max": 100},
}


def vllm_request(kwargs: dict[str, Any], *, v41: bool) -> tuple[bool, Any]:
    """(thinking, the encoder's effort) vLLM 0.32's wrappers take from ``chat_template_kwargs``
    (``apply_chat_template`` in ``deepseek_v4.py`` / ``deepseek_v41.py``); ``ValueError``
    where the V4.1 wrapper refuses the effort (HTTP 400)."""
    thinking = bool(kwargs.get("thinking")) or bool(kwargs.get("enable_thinking"))
    if "thinking" not in kwargs and "enable_thinking" not in kwargs:
        thinking = True
    effort = kwargs.get("reasoning_effort")
    if v41:
        if effort == "none":
            thinking, effort = False, None
        if effort is None:
            effort = "high"
        if not ((type(effort) is int and 1 <= effort <= 100) or effort in V41_BUDGET):
            raise ValueError(f"V4.1 refuses reasoning_effort {effort!r}")
        return thinking, effort
    if not isinstance(effort, str):
        effort = "high" if thinking else None
    elif effort == "none":
        thinking, effort = False, None
    elif effort in ("low", "minimal", "medium"):
        effort = "low"
    elif effort != "max":
        effort = "high"
    return thinking, effort


def _tools_text(functions: list[dict[str, Any]], v41: bool) -> str:
    block, invoke, param = (" calls", " invoke", " parameter") if v41 else (
        "tool_calls", "invoke", "parameter"
    )  # fmt: skip
    schemas = "\n".join(json.dumps(f, ensure_ascii=False) for f in functions)
    return f"""## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "<{DSML}{block}>" block like the following:

<{DSML}{block}>
<{DSML}{invoke} name="$TOOL_NAME">
<{DSML}{param} name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{DSML}{param}>
...
</{DSML}{invoke}>
<{DSML}{invoke} name="$TOOL_NAME2">
...
</{DSML}{invoke}>
</{DSML}{block}>

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.

Otherwise, output directly after </think> with tool calls or final response.

### Available Tool Schemas

{schemas}

You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.
"""  # noqa: E501


def _merge(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] = []
    for msg in messages:
        msg = copy.deepcopy(msg)
        if msg["role"] == "tool":
            block = {
                "type": "tool_result",
                "id": msg.get("tool_call_id", ""),
                "content": msg["content"],
            }
        elif msg["role"] == "user":
            block = {"type": "text", "text": msg.get("content", "")}
        else:
            merged.append(msg)
            continue
        if merged and merged[-1]["role"] == "user" and "blocks" in merged[-1]:
            merged[-1]["blocks"].append(block)
        else:
            merged.append({"role": "user", "blocks": [block]})
    order: dict[str, int] = {}
    for msg in merged:
        if msg["role"] == "assistant" and msg.get("tool_calls"):
            order = {c["id"]: i for i, c in enumerate(msg["tool_calls"]) if c.get("id")}
        elif msg["role"] == "user":
            results = [b for b in msg["blocks"] if b["type"] == "tool_result"]
            if len(results) > 1 and order:
                ranked = iter(sorted(results, key=lambda b: order.get(b["id"], 0)))
                msg["blocks"] = [
                    next(ranked) if b["type"] == "tool_result" else b for b in msg["blocks"]
                ]
    return merged


def _last_user(messages: list[dict[str, Any]], v41: bool) -> int:
    found = -1
    for i, m in enumerate(messages):
        if m["role"] in ("user", "developer") or (v41 and m["role"] == "system" and i > 0):
            found = i
    return found


def _params(call: dict[str, Any], v41: bool) -> str:
    tag = " parameter" if v41 else "parameter"
    out = []
    for key, value in json.loads(call["function"]["arguments"]).items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        kind = "true" if isinstance(value, str) else "false"
        out.append(f'<{DSML}{tag} name="{key}" string="{kind}">{text}</{DSML}{tag}>')
    return "\n".join(out)


def _one(
    i: int,
    msgs: list[dict[str, Any]],
    *,
    thinking: bool,
    drop: bool,
    effort: Any,
    v41: bool,
    table: str = "low50-high75",
) -> str:
    msg, role = msgs[i], msgs[i]["role"]
    last_user = _last_user(msgs, v41)
    out = ""
    if v41:
        pre = ""
        if i == 0 and thinking:
            budget = V41_TABLES[table][effort] if isinstance(effort, str) else effort
            pre = f"Reasoning Effort: {budget} (range 1-100, the higher the value, the more thorough the reasoning)\n\n"
        out = (SYSTEM if i == 0 and (pre or role == "system") else "") + pre
    elif i == 0 and thinking:
        out = V4_EFFORT[effort]
    extra = ""
    if msg.get("tools"):
        extra += "\n\n" + _tools_text([t["function"] for t in msg["tools"]], v41)
    if msg.get("response_format"):
        extra += (
            "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to "
            "reply:\n" + json.dumps(msg["response_format"], ensure_ascii=False)
        )
    if role == "system":
        out += (SYSTEM if v41 and i > 0 else "") + (msg.get("content") or "") + extra
    elif role == "developer":
        assert msg["content"]
        out += USER + msg["content"] + extra
    elif role == "user":
        texts = [
            b["text"] if b["type"] == "text" else "<tool_result>" + b["content"] + "</tool_result>"
            for b in msg["blocks"]
        ]
        out += USER + "\n\n".join(texts)
    elif role == "latest_reminder":
        out += REMINDER + msg["content"]
    else:
        calls = ""
        if msg.get("tool_calls"):
            block, invoke = (" calls", " invoke") if v41 else ("tool_calls", "invoke")
            invokes = [
                f'<{DSML}{invoke} name="{c["function"]["name"]}">\n{_params(c, v41)}\n</{DSML}{invoke}>'
                for c in msg["tool_calls"]
            ]
            calls = f"\n\n<{DSML}{block}>\n" + "\n".join(invokes) + f"\n</{DSML}{block}>"
        reasoning = ""
        if thinking and (not drop or i > last_user):
            reasoning = (msg.get("reasoning") or "") + "</think>"
        out += reasoning + (msg.get("content") or "") + calls + EOS
    nxt = msgs[i + 1]["role"] if i + 1 < len(msgs) else None
    if nxt is not None and nxt not in ("assistant", "latest_reminder"):
        return out
    if v41:
        opens = role in ("user", "developer") or (role == "system" and i > 0)
    else:
        opens = role in ("user", "developer") or (role == "system" and nxt in (None, "assistant"))
    if opens:
        think = thinking and (not drop or i >= last_user)
        out += ASSISTANT + ("<think>" if think else "</think>")
    return out


def reference_render(
    messages: list[dict[str, Any]],
    *,
    v41: bool = False,
    thinking: bool = False,
    effort: Any = None,
    tools: list[dict[str, Any]] | None = None,
    response_format: dict[str, Any] | None = None,
    drop_thinking: bool = True,
    add_generation_prompt: bool = True,
    table: str = "low50-high75",
) -> str:
    """The encoder's prompt for OpenAI-style ``messages`` (``reasoning_content`` read);
    ``effort`` is the encoder's value, ``table`` the V4.1 effort table."""
    msgs = []
    for m in messages:
        m = dict(m)
        if "reasoning_content" in m:
            m["reasoning"] = m.pop("reasoning_content")
        msgs.append(m)
    if tools or response_format:
        k = next((i for i, m in enumerate(msgs) if m["role"] == "system"), None)
        if k is None:
            msgs.insert(0, {"role": "system", "content": ""})
            k = 0
        if tools:
            msgs[k]["tools"] = tools
        if response_format:
            msgs[k]["response_format"] = response_format
    if effort is None:
        effort = "high" if v41 else "low"
    drop = drop_thinking and not tools
    msgs = _merge(msgs)
    if thinking and drop:
        last = _last_user(msgs, v41)
        kept = []
        for i, m in enumerate(msgs):
            if i >= last or m["role"] in ("user", "system", "latest_reminder"):
                kept.append(m)
            elif m["role"] == "assistant":
                kept.append({k: v for k, v in m.items() if k != "reasoning"})
        msgs = kept
    text = BOS + "".join(
        _one(i, msgs, thinking=thinking, drop=drop, effort=effort, v41=v41, table=table)
        for i in range(len(msgs))
    )
    if not add_generation_prompt:
        for closing in (ASSISTANT + "<think>", ASSISTANT + "</think>"):
            if text.endswith(closing):
                return text[: -len(closing)]
    return text
