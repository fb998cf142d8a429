"""The shipped reference model: loads offline, answers, and has the phase weakness."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from phaseaware.reference.paths import model_dir  # noqa: E402

PERIOD = 8
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reference():
    old = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        torch.set_num_threads(1)
        from phaseaware.reference.load import load_reference

        yield load_reference("cpu")
    finally:
        if old is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old


def _probes(seed: int, residues: list[int], n_each: int):
    """Fresh probes (not the training stream) whose target key sits at each residue."""
    from phaseaware.reference.synth import make_example

    rng = np.random.default_rng([seed, 4242])
    out = []
    for residue in residues:
        found = 0
        while found < n_each:
            # five facts, the asked one among four distractors: the demo's RAG prompts and
            # the reference calibration protocol (phaseaware.reference.probe_defaults)
            e = make_example(rng, total_tokens=int(rng.integers(112, 193)), n_records=5)
            far = e.answer_position - 1 - e.key_position >= 24
            if far and e.key_position % PERIOD == residue:
                out.append(e)
                found += 1
    return out


def _first_token_hits(model, tok, examples) -> np.ndarray:
    hits = []
    with torch.no_grad():
        for e in examples:
            ids = tok(e.prompt, add_special_tokens=False)["input_ids"]
            logits = model(torch.tensor([ids])).logits[0, -1]
            hits.append(tok.convert_ids_to_tokens(int(logits.argmax())) == e.answer)
    return np.array(hits, dtype=float)


def test_auto_classes_load_after_register():
    from transformers import AutoConfig, AutoModelForCausalLM

    from phaseaware.reference.load import register

    register()
    register()  # idempotent
    config = AutoConfig.from_pretrained(str(model_dir()), local_files_only=True)
    assert config.model_type == "phaseaware-ref"
    assert (config.compress_stride, config.compress_window, config.local_window) == (8, 8, 16)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir()), local_files_only=True)
    assert type(model).__name__ == "PhaseRefForCausalLM"


def test_shipped_files_are_small_safetensors():
    files = {p.name: p.stat().st_size for p in model_dir().iterdir()}
    assert "model.safetensors" in files and "tokenizer.json" in files
    assert not any(n.endswith((".bin", ".pt", ".pkl")) for n in files)
    assert sum(files.values()) < 20 * 1024 * 1024


def test_tokenizer_parses_specials_and_round_trips(reference):
    _, tok = reference
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is the access code for Alice ?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert prompt == "<bos> <|user|> What is the access code for Alice ? <|assistant|>"
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.bos_token_id and len(ids) == len(prompt.split())
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == prompt


def test_forward_pass_shapes(reference):
    model, tok = reference
    ids = torch.tensor(
        [tok("<bos> <|user|> The access code for", add_special_tokens=False)["input_ids"]]
    )
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], model.config.vocab_size)
    assert torch.isfinite(logits).all()


@pytest.mark.needs_trained_reference
def test_greedy_generation_answers_in_distribution_questions(reference):
    model, tok = reference
    probes = _probes(7, residues=[1, 3, 5], n_each=2)
    correct = 0
    for e in probes:
        ids = torch.tensor([tok(e.prompt, add_special_tokens=False)["input_ids"]])
        out = model.generate(ids, max_new_tokens=3, do_sample=False)
        completion = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True).strip()
        correct += completion == e.answer
    assert correct >= 5, f"{correct}/6 correct"


@pytest.mark.needs_trained_reference
def test_weak_residue_is_significantly_worse(reference):
    model, tok = reference
    metrics = json.loads((model_dir() / "training_metrics.json").read_text())
    acc = metrics["final"]["per_residue_accuracy"]
    weak = int(np.argmin(acc))
    others = [r for r in range(PERIOD) if r != weak]
    weak_hits = _first_token_hits(model, tok, _probes(11, [weak], 48))
    other_hits = _first_token_hits(model, tok, _probes(11, others, 7))
    p1, p2 = weak_hits.mean(), other_hits.mean()
    pooled = np.concatenate([weak_hits, other_hits]).mean()
    se = math.sqrt(pooled * (1 - pooled) * (1 / len(weak_hits) + 1 / len(other_hits)))
    z = (p2 - p1) / se
    assert p2 >= 0.8, f"strong residues only {p2:.2f}"
    assert p2 - p1 >= 0.15 and z > 2.33, (weak, p1, p2, z)
