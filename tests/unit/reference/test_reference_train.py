"""The reference model's attention kernel and the trainer's data and init helpers."""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from phaseaware.calibration.task import NAMES, NUMBERS  # noqa: E402
from phaseaware.reference.configuration import PhaseRefConfig  # noqa: E402
from phaseaware.reference.mask import compressed_mask, local_mask  # noqa: E402
from phaseaware.reference.modeling import (  # noqa: E402
    CompressedAttention,
    PhaseRefForCausalLM,
    rope,
)
from phaseaware.reference.tokenizer_build import build_tokenizer  # noqa: E402
from phaseaware.reference.train_data import make_batch  # noqa: E402
from phaseaware.reference.train_init import class_init  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def _explicit_attention(attn: CompressedAttention, x: torch.Tensor) -> torch.Tensor:
    """The joint softmax written out: scores, -inf where hidden, softmax, weighted sum."""
    b, t, _ = x.shape
    pos = torch.arange(t)
    q = rope(attn._heads(attn.q_proj(x)).transpose(1, 2), pos, attn.theta)
    k = rope(attn._heads(attn.k_proj(x)).transpose(1, 2), pos, attn.theta)
    v = attn._heads(attn.v_proj(x)).transpose(1, 2)
    ck, cv = attn.compress(x)
    scores = torch.cat([q @ ck.transpose(-1, -2), q @ k.transpose(-1, -2)], dim=-1)
    scores = scores / attn.hd**0.5
    visible = torch.cat(
        [
            compressed_mask(
                t, stride=attn.stride, window=attn.window, local_window=attn.local_window
            ),
            local_mask(t, local_window=attn.local_window),
        ],
        dim=1,
    )
    probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
    out = probs @ torch.cat([cv, v], dim=2)
    return attn.o_proj(out.transpose(1, 2).reshape(b, t, -1))


@pytest.mark.parametrize(("stride", "window", "local"), [(8, 8, 16), (4, 8, 8), (2, 4, 5)])
def test_fused_attention_equals_explicit_joint_softmax(stride, window, local):
    torch.manual_seed(0)
    config = PhaseRefConfig(
        vocab_size=32,
        hidden_size=32,
        num_attention_heads=2,
        compress_stride=stride,
        compress_window=window,
        local_window=local,
        initializer_range=0.2,
    )
    attn = CompressedAttention(config)
    with torch.no_grad():
        attn.gate_bias.normal_()
    x = torch.randn(2, 45, 32)
    got = attn(x, torch.arange(45))
    torch.testing.assert_close(got, _explicit_attention(attn, x), rtol=1e-4, atol=1e-5)


def test_batches_fit_short_sequences_and_respect_the_record_cap(tok):
    rng = np.random.default_rng(0)
    examples = make_batch(rng, tok, 64, 40, 72, repeats=8, max_records=3)
    names = set(NAMES)
    for e in examples:
        assert 40 <= len(e.text.split()) <= 72
        assert len({w for w in e.prompt.split() if w in names}) <= 3  # distinct records
        assert e.answer in NUMBERS


def testclass_init_adds_one_shared_direction_per_word_class(tok):
    torch.manual_seed(1)
    config = PhaseRefConfig(vocab_size=len(tok), initializer_range=0.02)
    plain = PhaseRefForCausalLM(config)
    torch.manual_seed(1)
    shaped = PhaseRefForCausalLM(config)
    class_init(shaped, tok, std=0.05, seed=0)
    delta = shaped.get_input_embeddings().weight - plain.get_input_embeddings().weight
    vocab = tok.get_vocab()
    for group in (NAMES, NUMBERS):
        rows = delta[[vocab[w] for w in group]]
        torch.testing.assert_close(rows, rows[:1].expand_as(rows))
        assert rows[0].norm() > 0
    name_dir = delta[vocab[NAMES[0]]]
    number_dir = delta[vocab[NUMBERS[0]]]
    assert not torch.allclose(name_dir, number_dir)


def test_query_shift_starts_as_a_no_op_and_reads_only_earlier_tokens():
    torch.manual_seed(2)
    base = PhaseRefConfig(vocab_size=40, hidden_size=32, num_attention_heads=2)
    shifted = PhaseRefConfig(vocab_size=40, hidden_size=32, num_attention_heads=2, query_shift=2)
    plain_model = PhaseRefForCausalLM(base).eval()
    shift_model = PhaseRefForCausalLM(shifted).eval()
    missing = shift_model.load_state_dict(plain_model.state_dict(), strict=False)
    assert all("shift_weight" in k for k in missing.missing_keys)
    ids = torch.randint(3, 40, (1, 30))
    with torch.no_grad():
        torch.testing.assert_close(shift_model(ids).logits, plain_model(ids).logits)
        for layer in shift_model.model.layers:
            layer.attn.shift_weight.normal_()
        changed = ids.clone()
        changed[0, 20] = 3 if ids[0, 20] != 3 else 4
        a, b = shift_model(ids).logits, shift_model(changed).logits
    torch.testing.assert_close(a[:, :20], b[:, :20])  # still causal
    assert not torch.allclose(a[:, 20:], b[:, 20:])


def test_partial_rope_rotates_only_the_first_dims():
    x = torch.randn(2, 3, 10, 16)
    pos = torch.arange(10)
    out = rope(x, pos, 10000.0, dims=4)
    torch.testing.assert_close(out[..., 4:], x[..., 4:])
    torch.testing.assert_close(out[..., :4], rope(x[..., :4], pos, 10000.0))
    torch.testing.assert_close(rope(x, pos, 10000.0, dims=16), rope(x, pos, 10000.0))


def test_recall_examples_repeat_each_pair_and_point_at_the_numbers(tok):
    from phaseaware.reference.synth import make_recall_example

    rng = np.random.default_rng(3)
    for _ in range(20):
        e = make_recall_example(rng, total_tokens=int(rng.integers(64, 113)))
        words = e.text.split()
        assert len(tok(e.text, add_special_tokens=False)["input_ids"]) == len(words)
        assert words[-1] == "<eos>" and e.answer_position == len(words) - 2
        targets = [*e.repeat_answer_positions, e.answer_position]
        assert len(targets) == 8
        for p in targets:
            name, number = words[p - 1], words[p]
            assert name in NAMES and number in NUMBERS
            first = words.index(name)
            assert first < p - 1 and words[first + 1] == number  # stated earlier, same number
        assert words[e.key_position] == words[e.answer_position - 1]
        assert e.answer == words[e.answer_position]


@pytest.mark.parametrize(("mode", "raw", "copy"), [("ck", False, False), ("qk+ov", True, True)])
def testmatch_init_copies_the_query_map_into_the_chosen_key_maps(mode, raw, copy):
    from phaseaware.reference.train_init import match_init

    torch.manual_seed(4)
    model = PhaseRefForCausalLM(
        PhaseRefConfig(vocab_size=40, hidden_size=32, num_attention_heads=2)
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    match_init(model, raw=raw, copy=copy)
    for layer in model.model.layers:
        a = layer.attn
        torch.testing.assert_close(a.ck_proj.weight, a.q_proj.weight)
        assert torch.equal(a.k_proj.weight, a.q_proj.weight) is raw
        assert torch.equal(a.cv_proj.weight, a.v_proj.weight) is copy
        assert torch.equal(a.o_proj.weight, a.v_proj.weight.t()) is copy
    after = model.state_dict()
    untouched = [
        k for k in before if not any(p in k for p in ("ck_proj", "k_proj", "cv_proj", "o_proj"))
    ]
    assert all(torch.equal(before[k], after[k]) for k in untouched)


def test_recall_mix_draws_that_fraction_of_dense_recall_sequences(tok):
    rng = np.random.default_rng(5)
    examples = make_batch(rng, tok, 400, 64, 112, repeats=2, recall=0.25)
    dense = sum("?" not in e.prompt for e in examples)  # recall sequences have no question
    assert 70 <= dense <= 130
    assert all(len(e.text.split()) <= 112 for e in examples)


def test_follow_up_questions_ask_other_records_and_keep_the_first_question(tok):
    from phaseaware.reference.synth import make_example

    rng = np.random.default_rng(6)
    for _ in range(30):
        total = int(rng.integers(96, 177))
        e = make_example(rng, total_tokens=total, n_records=4, questions=3)
        words = e.text.split()
        assert len(words) == total == len(tok(e.text, add_special_tokens=False)["input_ids"])
        assert e.prompt.split()[-1] == "<|assistant|>" and words[e.answer_position] == e.answer
        assert words[e.key_position + 1 : e.key_position + 3] == ["is", e.answer]
        stated = dict(re.findall(r"for (\S+) is (\S+) \.", e.text))
        asked = [words[e.answer_position - 3]]
        for p in e.repeat_answer_positions:
            assert words[p - 1] == "<|assistant|>" and words[p + 1] == "<eos>"
            assert stated[words[p - 3]] == words[p]
            asked.append(words[p - 3])
        assert len(set(asked)) == 3
    with pytest.raises(ValueError, match="questions"):
        make_example(rng, total_tokens=120, n_records=2, questions=3)


def test_target_last_puts_the_asked_record_right_before_the_question(tok):
    from phaseaware.reference.synth import make_example

    rng = np.random.default_rng(8)
    for repeats in (0, 2):
        for _ in range(20):
            total = int(rng.integers(80, 193))
            e = make_example(
                rng, total_tokens=total, n_records=4, repeats=repeats, target_last=True
            )
            words = e.prompt.split()
            # "... for NAME is NUMBER . What is the access code for NAME ? <|assistant|>"
            assert words[e.key_position] == words[-3]
            assert words[e.key_position + 1 : e.key_position + 3] == ["is", e.answer]
            assert e.answer_position - 1 - e.key_position == 12
