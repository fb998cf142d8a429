"""The reference tokenizer and the synthetic training sequences (no weights needed)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from phaseaware.calibration.task import vocabulary  # noqa: E402
from phaseaware.reference.synth import make_example  # noqa: E402
from phaseaware.reference.tokenizer_build import SPECIAL_TOKENS, build_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def test_every_task_word_and_special_is_one_token(tok):
    for word in [*vocabulary(), *SPECIAL_TOKENS]:
        ids = tok(word, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, word
        assert ids[0] != tok.unk_token_id or word == "<unk>", word
    assert [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == list(range(6))


def test_specials_are_parsed_and_nothing_is_added(tok):
    text = "<bos> <|user|> The access code for Alice is 123 . <|assistant|> 123 <eos>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text.split())
    assert tok.decode(ids) == text
    assert tok(text)["input_ids"] == ids  # the tokenizer never adds BOS/EOS itself


def test_chat_template_renders_the_training_prompt(tok):
    messages = [{"role": "user", "content": "A quiet river . What is the access code for Mina ?"}]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<bos> <|user|> A quiet river . What is the access code for Mina ? <|assistant|>"
    )
    with pytest.raises(Exception, match="role"):
        tok.apply_chat_template([{"role": "system", "content": "x"}], tokenize=False)


@pytest.mark.parametrize("seed", range(5))
def test_synthetic_examples_are_token_exact(tok, seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        total = int(rng.integers(96, 257))
        e = make_example(rng, total_tokens=total, n_records=int(rng.integers(2, 6)))
        ids = tok(e.text, add_special_tokens=False)["input_ids"]
        tokens = tok.convert_ids_to_tokens(ids)
        assert len(ids) == total and tok.unk_token_id not in ids
        assert tokens[e.key_position] == e.prompt.split()[-3]  # the question's name
        assert tokens[e.key_position + 2] == e.answer == tokens[e.answer_position]
        assert tokens[e.answer_position - 1] == "<|assistant|>"
        assert e.text.startswith(e.prompt) and tokens[-1] == "<eos>"


def test_repeated_records_mark_recallable_numbers(tok):
    rng = np.random.default_rng(3)
    for _ in range(60):
        e = make_example(rng, total_tokens=int(rng.integers(112, 193)), n_records=4, repeats=3)
        tokens = tok.convert_ids_to_tokens(tok(e.text, add_special_tokens=False)["input_ids"])
        assert len(e.repeat_answer_positions) == 3
        for p in e.repeat_answer_positions:
            name = tokens[p - 2]
            first = tokens.index(name)
            assert first < p - 2 and tokens[first + 2] == tokens[p] and tokens[p].isdigit()


def test_the_shipped_template_is_the_built_one():
    from phaseaware.reference.tokenizer_build import CHAT_TEMPLATE
    from phaseaware.tokenizers.registry import REFERENCE_MODEL_DIR

    assert (REFERENCE_MODEL_DIR / "chat_template.jinja").read_text() == CHAT_TEMPLATE


FOLD_ERRORS = [
    [{"role": "user", "content": "c"}, {"role": "system", "content": "x"}],
    [{"role": "system", "content": "x"}],
    [{"role": "system", "content": "x"}, {"role": "assistant", "content": "y"}],
]


def test_system_messages_fold_into_the_first_user_turn(tok):
    messages = [
        {"role": "system", "content": "Answer from the documents only ."},
        {"role": "developer", "content": "Be brief ."},
        {"role": "user", "content": "What is the access code for Mina ?"},
        {"role": "assistant", "content": "123"},
        {"role": "user", "content": "And Alice ?"},
    ]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<bos> <|user|> Answer from the documents only . Be brief . What is the access code "
        "for Mina ? <|assistant|> 123 <eos> <|user|> And Alice ? <|assistant|>"
    )
    for bad in FOLD_ERRORS:  # never dropped: a system message that cannot fold is an error
        with pytest.raises(Exception, match="put them first, followed by a user message"):
            tok.apply_chat_template(bad, tokenize=False)


def test_phaseaware_renders_what_the_server_tokenizes_with_a_system_message(tok):
    """Byte- and token-exact: assemble(messages=..., chat_format="hf") on the reference
    tokenizer against the server engine's own encode_chat of the filled messages."""
    from types import SimpleNamespace

    from phaseaware import assemble
    from phaseaware.reference.engine import ReferenceEngine

    question = "What is the access code for Alice ?"
    messages = [
        {"role": "system", "content": "Answer from the documents only ."},
        {"role": "user", "content": "{context} " + question},
    ]
    chunks = ["The access code for Alice is 123 .", "A quiet river ."]
    result = assemble(
        chunks,
        messages=messages,
        tokenizer="reference",
        chat_format="hf",
        question=question,
        budget_tokens=100,
    )
    model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=512))
    engine = ReferenceEngine(model, tok)
    filled = [dict(m) for m in result.messages]
    assert engine.render_chat(filled) == result.prompt
    assert engine.encode_chat(filled) == tok(result.prompt, add_special_tokens=False)["input_ids"]
