"""Probe construction with real tokenizers: exact lengths and positions, verified independently."""

from __future__ import annotations

import pytest

from phaseaware.calibration.probes import ProbeSettings, build_group, iter_groups, judge
from phaseaware.chat import conversation_layout
from phaseaware.errors import CalibrationError, InputError
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
    layout = conversation_layout(tokenizer=tok, chat_format=template)
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


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def with_window(request):
    """The same base prompts with the window sweep added, and without it."""
    spec, template = request.param
    tok = load_tokenizer(spec)
    layout = conversation_layout(tokenizer=tok, chat_format=template)
    out = []
    for sweeps in (("key", "length", "window"), ("key", "length")):
        settings = ProbeSettings(
            context_tokens=240, n_offsets=8, base_prompts=3, seed=7, sweeps=sweeps
        )
        out.append(list(iter_groups(tokenizer=tok, layout=layout, settings=settings)))
    return tok, out[0], out[1]


def test_window_sweep_moves_only_the_key_distance(with_window):
    tok, built, _ = with_window
    for group in built:
        window = [p for p in group.probes if p.sweep == "window"]
        assert [p.probe_id for p in window] == [f"window:{group.base_index}:{k}" for k in range(8)]
        key_query = {p.query_position for p in group.probes if p.sweep == "key"}
        d0 = window[0].prompt_tokens - window[0].key_position
        for p in window:
            tokens = tok.tokenize(p.text)
            extra = group.base_index % 8  # base prompts spread the length over residues
            assert len(tokens) == p.prompt_tokens == 240 + extra  # constant within a base
            assert p.key_position == _key_token(tok, p)
            question = f"What is the access code for {p.target_name} ?"
            assert p.query_position == tokens.token_at_char(p.text.rindex(question))
            # the question keeps its position (moved by the base's extra tokens)
            assert {p.query_position - extra} == key_query
            assert len(tokens) - _key_token(tok, p) == d0 + p.offset
            # the target record is the last record of the context: only pads follow it
            record = f"The access code for {p.target_name} is {p.answer} ."
            tail = p.text[p.text.index(record) + len(record) : p.text.rindex(question)]
            assert "access code" not in tail and tail.count(" .") <= 1
        assert 1 <= d0 < 240
    # at a fixed distance the key residue differs from base to base
    first = [next(p for p in g.probes if p.sweep == "window") for g in built]
    assert len({p.key_position % 8 for p in first}) == len(built)


def test_window_sweep_leaves_other_sweeps_unchanged(with_window):
    _, built, plain = with_window
    for group, reference in zip(built, plain, strict=True):
        assert [p for p in group.probes if p.sweep != "window"] == list(reference.probes)
        assert [p.sweep for p in group.probes] == ["key"] * 8 + ["length"] * 8 + ["window"] * 8


def test_sweep_names():
    assert ProbeSettings(context_tokens=200, n_offsets=4, base_prompts=1).sweeps == (
        "key",
        "length",
    )
    ProbeSettings(context_tokens=200, n_offsets=4, base_prompts=1, sweeps=("window",))
    with pytest.raises(CalibrationError, match="key,length,window"):
        ProbeSettings(context_tokens=200, n_offsets=4, base_prompts=1, sweeps=("depth",))


def test_deterministic_and_bos_counted():
    tok = load_tokenizer("deepseek-v4")
    layout = conversation_layout(tokenizer=tok, chat_format="deepseek-v4")
    settings = ProbeSettings(context_tokens=200, n_offsets=4, base_prompts=1, seed=3)
    a = build_group(tokenizer=tok, layout=layout, settings=settings, base_index=0)
    b = build_group(tokenizer=tok, layout=layout, settings=settings, base_index=0)
    assert a == b
    assert a.probes[0].text.startswith(tok.bos_text)


def test_too_short_context_names_flag():
    tok = load_tokenizer("tiktoken:cl100k_base")
    layout = conversation_layout(tokenizer=tok, chat_format="chatml")
    settings = ProbeSettings(context_tokens=30, n_offsets=8, base_prompts=1)
    with pytest.raises(CalibrationError, match="--context-tokens"):
        build_group(tokenizer=tok, layout=layout, settings=settings, base_index=0)


def test_judge():
    tok = load_tokenizer("tiktoken:cl100k_base")
    layout = conversation_layout(tokenizer=tok, chat_format="chatml")
    settings = ProbeSettings(context_tokens=150, n_offsets=2, base_prompts=1)
    probe = build_group(tokenizer=tok, layout=layout, settings=settings, base_index=0).probes[0]
    assert judge(probe, f"The code is {probe.answer}.")
    assert not judge(probe, "I do not know")


def test_system_prompt_of_the_settings_joins_the_single_turn_conversation():
    """``ProbeSettings.system`` is written as the format's system turn, verbatim."""
    tok = load_tokenizer("tiktoken:cl100k_base")
    layout = conversation_layout(tokenizer=tok, chat_format="chatml")
    system = "You are terse. <|im_start|> stays as written."
    settings = ProbeSettings(context_tokens=150, n_offsets=2, base_prompts=1, system=system)
    probe = build_group(tokenizer=tok, layout=layout, settings=settings, base_index=0).probes[0]
    assert probe.text.startswith(f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n")
    assert probe.text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert probe.prompt_tokens == len(tok.encode(probe.text))
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "{context}"}]
    conversation = conversation_layout(tokenizer=tok, chat_format="chatml", messages=messages)
    with pytest.raises(InputError, match="not the single-turn conversation"):
        build_group(tokenizer=tok, layout=conversation, settings=settings, base_index=0)
