"""DeepSeek-V4 as llama.cpp renders it: text only (no DeepSeek-V4 GGUF runs here).

llama-cpp-python 0.3.36's vendored llama.cpp knows the ``deepseek4`` architecture, and a
V4 GGUF's chat template is Jinja, which this build renders in Python
(``Jinja2ChatFormatter``). No DeepSeek-V4 GGUF is available offline (nor would one fit a
24 GiB machine), so the server's token ids and usage are not compared; the text is: llama.cpp's own V4 template
(``chat_templates/deepseek_v4_flash_0731.jinja``) rendered by the server's renderer,
against phaseaware's ``deepseek-v4`` format (DeepSeek's encoder, as vLLM runs it).

Found: every conversation, thinking off and on, every effort, agrees, and so do tools
after a system prompt; with tools and no system message the template writes the tools
section without the ``"\\n\\n"`` that DeepSeek's encoder (phaseaware, vLLM) puts before it
(right after BOS, or after the effort line). The test pins that difference exactly, so a
change on either side shows: for such requests a llama.cpp server with this template
counts other tokens than phaseaware's ``deepseek-v4`` (the usage check reports it).
"""

from __future__ import annotations

from typing import Any

from phaseaware.chat import ChatSettings, get_chat_format, parse_messages
from phaseaware.tokenizers import load_tokenizer
from tests.e2e.llamacpp.conftest import record
from tests.e2e.llamacpp.test_tokens import CONVERSATIONS, WEATHER_TOOL
from tests.support.llamacpp_server import server_render
from tests.support.smollm2 import template

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"


def test_llama_cpp_renders_deepseek_v4_as_phaseaware_does() -> None:
    tok = load_tokenizer("deepseek-v4")
    cases: list[dict[str, Any]] = []
    ours: list[tuple[str, bool, str]] = []
    for name, messages in CONVERSATIONS.items():
        for thinking in (False, True):
            for tools in ((), (WEATHER_TOOL,)):
                for effort in (None, "low", "high", "max") if thinking else (None,):
                    settings = ChatSettings(thinking=thinking, tools=tools, reasoning_effort=effort)
                    text = get_chat_format("deepseek-v4", tok, settings=settings).render(
                        parse_messages(messages)
                    )
                    kwargs: dict[str, Any] = {"thinking": thinking}
                    if effort is not None:
                        kwargs["reasoning_effort"] = effort
                    cases.append({"messages": messages, "kwargs": kwargs,
                                  **({"tools": list(tools)} if tools else {})})  # fmt: skip
                    has_system = messages[0]["role"] == "system"
                    ours.append((name, bool(tools) and not has_system, text))
    theirs = server_render(
        None, cases, template={"template": template("deepseek_v4_flash_0731"), "bos": BOS,
                               "eos": EOS},
    )  # fmt: skip
    same = sum(text == server for (_, _, text), server in zip(ours, theirs, strict=True))
    for (name, tools_first, text), server in zip(ours, theirs, strict=True):
        record("DeepSeek-V4 text (llama.cpp's V4 template, no GGUF)", text == server)
        if tools_first:  # the one difference: no "\n\n" before the tools section
            assert text == server.replace("## Tools\n", "\n\n## Tools\n", 1), name
            assert text != server
        else:
            assert text == server, name
    assert same == len(ours) - sum(t for _, t, _ in ours) > 0
