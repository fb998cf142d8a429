"""Probe construction with real tokenizers: exact lengths and positions, verified independently."""

from __future__ import annotations

import pytest

from phaseaware.calibrate.probes import ProbeSettings, build_group, iter_groups, judge
from phaseaware.errors import CalibrationError
from phaseaware.layouts import get_layout
from phaseaware.reference.paths import model_dir
from phaseaware.tokenizers import load_tokenizer

CASES = [("tiktoken:cl100k_base", "chatml"), ("deepseek-v4", "deepseek-v4")]
if (model_dir() / "tokenizer.json").is_file():
    CASES.append(("reference", "hf"))


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def groups(request):
    spec, template = request.param
    tok = load_tokenizer(spec)
    settings = ProbeSettings(context_tokens=240, n_offsets=8, base_prompts=3, seed=7)
    layout = get_layout(template, tok)
    return tok, settings, list(iter_groups(tokenizer=tok, layout=layout, settings=settings))


def _key_token(tok, probe) -> int:
    # independent check: the key is the first token whose text holds the target name's start
    needle = f"The access code for {probe.target_name} is {probe.answer} ."
    char = probe.text.index(needle) + len("The access code for ")
    return tok.tokenize(probe.text).token_at_char(char)


def test_key_sweep_exact(groups):
    tok, settings, built = groups
    for group in built:
        key = [p for p in group.probes if p.sweep == "key"]
        assert [p.offset for p in key] == list(range(8))
        for p in key:
            assert len(tok.encode(p.text)) == settings.context_tokens == p.prompt_tokens
            assert p.key_position == _key_token(tok, p)
            assert p.key_position % 8 == p.offset  # key residue equals the offset
        assert len({p.query_position for p in key}) == 1  # question fixed
        assert len({p.key_position - p.offset for p in key}) == 1  # same depth


def test_length_sweep_moves_only_length(groups):
    tok, settings, built = groups
    for group in built:
        length = [p for p in group.probes if p.sweep == "length"]
        base_key = length[0].key_position
        for p in length:
            assert len(tok.encode(p.text)) == settings.context_tokens + p.offset
            assert p.key_position == base_key == _key_token(tok, p)
            assert (p.prompt_tokens - settings.context_tokens) % 8 == p.offset % 8


def test_paired_design_and_ids(groups):
    _, settings, built = groups
    for group in built:
        ids = [p.probe_id for p in group.probes]
        assert ids == [f"{s}:{group.base_index}:{k}" for s in ("key", "length") for k in range(8)]
        assert len({p.answer for p in group.probes}) == 1


def test_deterministic_and_bos_counted():
    tok = load_tokenizer("deepseek-v4")
    layout = get_layout("deepseek-v4", tok)
    settings = ProbeSettings(context_tokens=200, n_offsets=4, base_prompts=1, seed=3)
    a = build_group(tokenizer=tok, layout=layout, settings=settings, base_index=0)
    b = build_group(tokenizer=tok, layout=layout, settings=settings, base_index=0)
    assert a == b
    assert a.probes[0].text.startswith(tok.bos_text)


def test_too_short_context_names_flag():
    tok = load_tokenizer("tiktoken:cl100k_base")
    layout = get_layout("chatml", tok)
    settings = ProbeSettings(context_tokens=30, n_offsets=8, base_prompts=1)
    with pytest.raises(CalibrationError, match="--context-tokens"):
        build_group(tokenizer=tok, layout=layout, settings=settings, base_index=0)


def test_judge():
    tok = load_tokenizer("tiktoken:cl100k_base")
    layout = get_layout("chatml", tok)
    settings = ProbeSettings(context_tokens=150, n_offsets=2, base_prompts=1)
    probe = build_group(tokenizer=tok, layout=layout, settings=settings, base_index=0).probes[0]
    assert judge(probe, f"The code is {probe.answer}.")
    assert not judge(probe, "I do not know")
