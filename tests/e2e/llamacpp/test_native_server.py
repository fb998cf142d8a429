"""Token for token against llama.cpp's own C++ ``llama-server`` (``--jinja``, SmolLM2 GGUF).

llama-server renders the GGUF's Jinja template with its own C++ engine, not Python's
jinja2. It shows its ids through ``/apply-template`` (the chat prompt) and ``/tokenize``
(text only: a chat body gets an empty list), so ``probe-endpoint`` reads exact ids
there. For every conversation and for full assemblies: phaseaware's render equals the
server's ``/apply-template``, the server's ids equal phaseaware's, and a chat completion
(official ``openai`` client) counts exactly as many prompt tokens. The Qwen2.5-template
server also renders bound tools and assistant tool calls, whose ``arguments`` the server
hands to the template as a JSON object (as vLLM and SGLang do).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

import phaseaware
from phaseaware.chat import ChatSettings, get_chat_format, parse_messages
from phaseaware.endpoints import probe_endpoint
from phaseaware.endpoints.tokenize import server_token_ids
from phaseaware.errors import PhaseawareWarning
from phaseaware.tokenizers import load_tokenizer
from tests.e2e.llamacpp.conftest import record
from tests.e2e.llamacpp.test_tokens import CONVERSATIONS, DOCUMENTS, QUESTION
from tests.support.chat_cases import TOOL_HISTORY, WEATHER_TOOL
from tests.support.llamacpp_server import LlamaCppServer


def _client(server: LlamaCppServer) -> Any:
    import openai

    return openai.OpenAI(base_url=server.base_url, api_key="EMPTY", timeout=120, max_retries=0)


def _apply_template(server: LlamaCppServer, body: Mapping[str, Any]) -> str:
    doc = _client(server).post(server.root + "/apply-template", body=dict(body), cast_to=object)
    assert isinstance(doc, dict)
    return str(doc["prompt"])


def _compare(
    server: LlamaCppServer, tok: Any, name: str, cases: Mapping[str, Sequence[Mapping[str, Any]]],
    *, tools: Sequence[Mapping[str, Any]] = (),
) -> None:  # fmt: skip
    settings = ChatSettings(tools=tuple(tools))
    extra: dict[str, Any] = {"tools": list(tools)} if tools else {}
    problems = []
    for case, messages in cases.items():
        text = get_chat_format("hf", tok, settings=settings).render(parse_messages(messages))
        ids = list(tok.encode(text))
        reply = _client(server).chat.completions.create(
            model=server.model, messages=list(messages), max_tokens=1, temperature=0, **extra
        )  # type: ignore[call-overload]
        server_ids = server_token_ids(
            _client(server), server.model, base=server.base_url, messages=messages
        ) if not tools else None  # fmt: skip
        checks = {
            "/apply-template": _apply_template(server, {"messages": messages, **extra}) == text,
            "usage.prompt_tokens": reply.usage is not None
            and reply.usage.prompt_tokens == len(ids),
        }
        if server_ids is not None:
            checks["/tokenize ids"] = server_ids == ids
        for what, ok in checks.items():
            record(f"llama-server {name}: {what}", ok)
            if not ok:
                problems.append(f"{case}: {what}")
    assert not problems, problems


def test_probe_reads_exact_ids_and_names_llama_server(native: LlamaCppServer, tmp_path) -> None:
    tok = load_tokenizer(f"hf:{native.gguf}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PhaseawareWarning)  # same template: no warning
        found = probe_endpoint(
            base_url=native.base_url, model=native.model, tokenizer=tok, chat_format="hf",
            rounds=2, save=False,
        )  # fmt: skip
    assert (found.mode, found.offset, found.stability) == ("exact", 0, "constant")
    assert found.ids_route == "tokenize"
    assert found.server is not None and found.server.startswith("llama.cpp llama-server b")
    assert tok.chat_template is not None
    assert found.chat_template_sha256 == hashlib.sha256(tok.chat_template.encode()).hexdigest()
    record("llama-server probe-endpoint: exact, offset 0, server, template", True)


def test_every_conversation_matches_token_for_token(native: LlamaCppServer) -> None:
    tok = load_tokenizer(f"hf:{native.gguf}")
    _compare(native, tok, "SmolLM2 template", CONVERSATIONS)


@pytest.mark.parametrize("system", [None, "Answer from the notes only."])
def test_assembled_prompts_match_token_for_token(native: LlamaCppServer, system) -> None:
    tok = load_tokenizer(f"hf:{native.gguf}")
    result = phaseaware.assemble(
        DOCUMENTS, tokenizer=tok, chat_format="hf", question=QUESTION, system=system,
        budget_tokens=1024,
    )  # fmt: skip
    assert len(tok.encode(result.prompt)) == result.token_count
    _compare(native, tok, "assemble (hf)", {"assembly": list(result.messages)})


def test_tool_calls_and_bound_tools_render_as_the_server_renders(
    native_tools: LlamaCppServer,
) -> None:
    tok = load_tokenizer(f"hf:{native_tools.gguf}")
    cases = {"tool call + result": TOOL_HISTORY}
    _compare(native_tools, tok, "Qwen2.5 template, tool calls", cases)
    _compare(native_tools, tok, "Qwen2.5 template, tool calls + tools", cases, tools=[WEATHER_TOOL])


def test_probe_finds_llama_server_passes_tool_arguments_as_an_object(
    native_tools: LlamaCppServer,
) -> None:
    from tests.e2e.llamacpp.test_probe import _tool_arguments_round_trip

    _tool_arguments_round_trip(native_tools, "object")
