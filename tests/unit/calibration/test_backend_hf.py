"""The HF calibration backend's fast paths give exactly the answers of plain greedy decoding.

A tiny random Llama (float64, so no two logits tie by rounding) answers groups of
prompts that share a prefix, the way a base prompt's variants do. The backend with
prefix reuse + batching (batches of every size, several batches per group), the
backend with full recompute one by one, and step-by-step greedy decoding without a
cache or a draft must give the same texts; the answer log-likelihoods must match
a teacher-forced full pass.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from phaseaware.calibration.backends.base import ProbeRequest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from phaseaware.calibration.backends.hf import HFBackend  # noqa: E402

CHARS = "0123456789 .abcdefghijklmnopqrstuvwxyz"
EOS = len(CHARS)
DONE = re.compile(r"\d+\D")


class CharTokenizer:
    """One token per character of ``CHARS``; id ``EOS`` decodes to nothing."""

    spec = "test:chars"
    bos_text = ""

    def encode(self, text: str) -> list[int]:
        return [CHARS.index(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(CHARS[i] for i in ids if i < EOS)

    def tokenize(self, text: str):  # pragma: no cover - not used by the backend
        raise NotImplementedError

    def fingerprint(self) -> str:  # pragma: no cover - not used by the backend
        return "sha256:chars"


def _model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(7)
    config = LlamaConfig(
        vocab_size=EOS + 1,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        eos_token_id=EOS,
        initializer_range=0.5,
    )
    return LlamaForCausalLM(config).double().eval()


MODEL = _model()
TOKENIZER = CharTokenizer()


def _backend(*, reuse: bool, max_batch: int) -> HFBackend:
    return HFBackend(
        MODEL, TOKENIZER, name="tiny", reuse_prefix=reuse, max_batch=max_batch, threads=None
    )


def _greedy(prompt: str, max_tokens: int) -> str:
    """Step-by-step greedy decoding, full recompute, stopping as the backend does."""
    ids, generated = TOKENIZER.encode(prompt), []
    with torch.no_grad():
        for _ in range(max_tokens):
            token = int(MODEL(torch.tensor([ids])).logits[0, -1].argmax())
            if token == EOS:
                break
            generated.append(token)
            ids.append(token)
            if DONE.search(TOKENIZER.decode(generated)):
                break
    return TOKENIZER.decode(generated)


def _answer_logprob(prompt: str, answer: str) -> float:
    ids, answer_ids = TOKENIZER.encode(prompt), TOKENIZER.encode(answer)
    with torch.no_grad():
        logits = MODEL(torch.tensor([ids + answer_ids])).logits[0].log_softmax(-1)
    return sum(float(logits[len(ids) - 1 + j, a]) for j, a in enumerate(answer_ids))


def _requests(prefix: str, suffixes: list[str], answers: list[str], max_tokens: int):
    return [
        ProbeRequest(f"p{i}", prefix + s, len(prefix + s), a, None, max_tokens)
        for i, (s, a) in enumerate(zip(suffixes, answers, strict=True))
    ]


text = st.text(alphabet=CHARS, min_size=1, max_size=12)


@st.composite
def groups(draw):
    prefix = draw(st.text(alphabet=CHARS, min_size=0, max_size=40))
    n = draw(st.integers(1, 7))
    if draw(st.booleans()):  # equal lengths: the key sweep's case, batched together
        size = draw(st.integers(1, 10))
        word = st.text(alphabet=CHARS, min_size=size, max_size=size)
        suffixes = draw(st.lists(word, min_size=n, max_size=n))
    else:
        suffixes = draw(st.lists(text, min_size=n, max_size=n))
    max_tokens = draw(st.integers(1, 8))
    # an answer the model gives (the draft is accepted in full), a prefix of it (the draft
    # is accepted and decoding goes on), or any number (the draft is rejected early)
    mode = draw(st.sampled_from(["model", "partial", "other"]))
    by_prompt: dict[str, str] = {}  # identical prompts are one probe with one answer
    for s in suffixes:
        if s in by_prompt:
            continue
        if mode == "other":
            by_prompt[s] = draw(st.from_regex(r"[0-9]{1,4}", fullmatch=True))
            continue
        reply = _greedy(prefix + s, max_tokens) or "7"
        by_prompt[s] = reply[: max(1, len(reply) // 2)] if mode == "partial" else reply
    answers = [by_prompt[s] for s in suffixes]
    return prefix, suffixes, answers, max_tokens, draw(st.integers(1, 8))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups())
@example(("the key is ", ["ab", "cd", "ab", "ef"], ["12", "12", "12", "12"], 6, 2))
def test_prefix_reuse_and_batching_equal_plain_greedy(case):
    prefix, suffixes, answers, max_tokens, max_batch = case
    requests = _requests(prefix, suffixes, answers, max_tokens)
    fast = {c.probe_id: c for c in _backend(reuse=True, max_batch=max_batch).complete(requests)}
    slow = {c.probe_id: c for c in _backend(reuse=False, max_batch=1).complete(requests)}
    assert set(fast) == set(slow) == {r.probe_id for r in requests}
    for request in requests:
        want = _greedy(request.prompt, max_tokens)
        assert fast[request.probe_id].text == slow[request.probe_id].text == want
        for got in (fast[request.probe_id], slow[request.probe_id]):
            if got.answer_logprob is not None:  # set when the group's answers have one length
                expected = _answer_logprob(request.prompt, request.answer)
                assert math.isclose(got.answer_logprob, expected, rel_tol=1e-5, abs_tol=1e-4)


def test_reuse_is_used_and_logits_are_cut_to_the_answer():
    """With a KV cache the shared prefix is computed once, and no pass projects more than
    the answer's positions through the LM head."""
    backend = _backend(reuse=True, max_batch=16)
    assert backend.kv_cache
    calls: list[tuple[int, int, int]] = []
    head = MODEL.lm_head

    def record(module, args, output):
        calls.append(tuple(args[0].shape))

    inputs: list[tuple[int, int]] = []

    def record_input(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        inputs.append(tuple(ids.shape))

    hooks = [
        head.register_forward_hook(record),
        MODEL.register_forward_pre_hook(record_input, with_kwargs=True),
    ]
    try:
        prefix = "abcdefghijklmnopqrst "
        requests = _requests(prefix, ["x1", "y2", "z3"], ["42", "42", "42"], 4)
        list(backend.complete(requests))
    finally:
        for hook in hooks:
            hook.remove()
    assert inputs[0] == (1, len(prefix))  # the prefix, once
    assert inputs[1] == (3, 2 + 2)  # every suffix + the draft, one batch
    assert all(shape[1] <= 3 for shape in calls)  # draft length + 1 at most
