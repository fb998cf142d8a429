"""What a query may see: the raw local window and the compressed windows.

Pure functions of sequence length and the compression geometry (all in
tokens, absolute positions from 0). The attention layer uses them as masks;
tests compare them with a slow loop over positions.

Rules for a query at position ``t``:

* raw key ``s`` is visible iff ``t - local_window < s <= t``;
* compressed window ``j`` (covering ``[j*stride, j*stride + window)``) is
  visible iff it is complete (``j*stride + window - 1 <= t``) and not wholly
  inside the local window (``j*stride <= t - local_window``). A window that
  straddles the local-window edge is therefore visible both compressed (as a
  whole) and, for its newer tokens, raw; no token is ever invisible.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from phaseaware.caches import register_cache

__all__ = ["num_windows", "local_mask", "compressed_mask", "joint_mask"]


def num_windows(seq_len: int, *, stride: int, window: int) -> int:
    """Number of complete compression windows within ``seq_len`` tokens."""
    if seq_len < window:
        return 0
    return (seq_len - window) // stride + 1


def local_mask(seq_len: int, *, local_window: int) -> torch.Tensor:
    """Bool ``(seq_len, seq_len)``: ``[t, s]`` is True iff query t sees raw key s."""
    t = torch.arange(seq_len).unsqueeze(1)
    s = torch.arange(seq_len).unsqueeze(0)
    return (s <= t) & (s > t - local_window)


def compressed_mask(seq_len: int, *, stride: int, window: int, local_window: int) -> torch.Tensor:
    """Bool ``(seq_len, n_windows)``: ``[t, j]`` is True iff query t sees window j."""
    n = num_windows(seq_len, stride=stride, window=window)
    t = torch.arange(seq_len).unsqueeze(1)
    start = (torch.arange(n) * stride).unsqueeze(0)
    complete = start + window - 1 <= t
    older_than_local = start <= t - local_window
    return complete & older_than_local


@lru_cache(maxsize=64)
def joint_mask(seq_len: int, *, stride: int, window: int, local_window: int) -> torch.Tensor:
    """Bool ``(seq_len, n_windows + seq_len)``: ``[compressed | local]``, as attention reads them.

    Cached (a pure function of its arguments, shared by every layer and step);
    callers must not modify the returned tensor.
    """
    return torch.cat(
        [
            compressed_mask(seq_len, stride=stride, window=window, local_window=local_window),
            local_mask(seq_len, local_window=local_window),
        ],
        dim=1,
    )


register_cache(
    "reference.joint_mask",
    size=lambda: (joint_mask.cache_info().currsize, None),
    clear=joint_mask.cache_clear,
    bound="LRU, 64 masks",
)
