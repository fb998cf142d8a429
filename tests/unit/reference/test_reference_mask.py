"""The reference model's visibility masks vs a slow, obviously-correct loop."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from phaseaware.reference.mask import compressed_mask, local_mask, num_windows  # noqa: E402


def slow_windows(seq_len: int, stride: int, window: int) -> list[tuple[int, int]]:
    """(first, last) absolute positions of every complete window."""
    out = []
    j = 0
    while j * stride + window - 1 < seq_len:
        out.append((j * stride, j * stride + window - 1))
        j += 1
    return out


def slow_visible(t: int, first: int, last: int, local_window: int) -> bool:
    local = set(range(max(0, t - local_window + 1), t + 1))
    complete = last <= t
    wholly_local = all(p in local for p in range(first, last + 1))
    return complete and not wholly_local


geometry = st.tuples(
    st.integers(0, 80), st.integers(1, 8), st.integers(0, 8), st.integers(1, 24)
).map(lambda g: (g[0], g[1], g[1] + g[2], g[3]))


@settings(max_examples=150, deadline=None)
@given(geometry)
def test_compressed_mask_matches_slow_loop(geo):
    seq_len, stride, window, local_window = geo
    windows = slow_windows(seq_len, stride, window)
    assert num_windows(seq_len, stride=stride, window=window) == len(windows)
    got = compressed_mask(seq_len, stride=stride, window=window, local_window=local_window)
    assert tuple(got.shape) == (seq_len, len(windows))
    for t in range(seq_len):
        for j, (first, last) in enumerate(windows):
            assert bool(got[t, j]) == slow_visible(t, first, last, local_window), (t, j)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 60), st.integers(1, 24))
def test_local_mask_matches_slow_loop(seq_len, local_window):
    got = local_mask(seq_len, local_window=local_window)
    for t in range(seq_len):
        for s in range(seq_len):
            assert bool(got[t, s]) == (t - local_window < s <= t)


def test_every_token_is_seen_raw_or_compressed():
    """With W=S and W <= local window, no past token falls into a gap."""
    seq_len, stride, local_window = 64, 8, 16
    comp = compressed_mask(seq_len, stride=stride, window=stride, local_window=local_window)
    loc = local_mask(seq_len, local_window=local_window)
    for t in range(seq_len):
        covered = {s for s in range(seq_len) if loc[t, s]}
        for j in range(comp.shape[1]):
            if comp[t, j]:
                covered |= set(range(j * stride, j * stride + stride))
        assert set(range(t + 1)) <= covered, t


def test_model_forward_is_causal_and_position_absolute():
    from phaseaware.reference.configuration import PhaseRefConfig
    from phaseaware.reference.modeling import PhaseRefForCausalLM

    torch.manual_seed(0)
    config = PhaseRefConfig(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        local_window=6,
    )
    model = PhaseRefForCausalLM(config).eval()
    ids = torch.randint(0, 50, (2, 40))
    with torch.no_grad():
        full = model(ids).logits
        prefix = model(ids[:, :25]).logits
        changed = ids.clone()
        changed[:, 30:] = (changed[:, 30:] + 1) % 50
        later = model(changed).logits
    assert torch.allclose(full[:, :25], prefix, atol=1e-5)
    assert torch.allclose(full[:, :30], later[:, :30], atol=1e-5)
    # A token far outside the local window still influences the last position
    # (through compressed memory).
    far = ids.clone()
    far[:, 3] = (far[:, 3] + 7) % 50
    with torch.no_grad():
        assert not torch.allclose(model(far).logits[:, -1], full[:, -1])
