"""The reference model: a small causal LM whose attention reads chunk-compressed memory.

Each attention layer has two kinds of memory, scored in ONE joint softmax:

* raw keys/values of the last ``local_window`` tokens (exact);
* one compressed entry per complete window of ``compress_window`` tokens,
  windows aligned to ABSOLUTE positions (window ``j`` covers
  ``[j*S, j*S + W)``). An entry is a gated sum over its tokens (softmax over
  offsets of ``x . w_gate + bias[offset]``, per head) of separate key and value
  payload projections; the compressed key is RMS-normalised and then rotated
  (RoPE) at the position of the window's last token.

What each query may see is defined in :mod:`phaseaware.reference.mask`.
Positions are absolute from 0 (BOS = 0). There is no KV cache: generation
recomputes the whole forward pass each step (sequences are short). Padding, if
any, must be on the right (the model is causal, so right padding never changes
earlier positions); ``attention_mask`` is accepted and ignored.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from phaseaware.reference.configuration import PhaseRefConfig
from phaseaware.reference.mask import joint_mask, num_windows

__all__ = ["PhaseRefForCausalLM", "PhaseRefModel"]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * scale * self.weight


def rope(
    x: torch.Tensor, positions: torch.Tensor, theta: float, dims: int | None = None
) -> torch.Tensor:
    """Rotate the first ``dims`` of ``x`` (..., n, head_dim) by absolute ``positions`` (n,)."""
    if dims is not None and dims < x.shape[-1]:
        return torch.cat([rope(x[..., :dims], positions, theta), x[..., dims:]], dim=-1)
    half = x.shape[-1] // 2
    inv_freq = theta ** (-torch.arange(half, dtype=torch.float32, device=x.device) / half)
    angles = positions.to(torch.float32).unsqueeze(-1) * inv_freq
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class CompressedAttention(nn.Module):
    """Joint softmax over compressed windows and the raw local window."""

    def __init__(self, config: PhaseRefConfig) -> None:
        super().__init__()
        h, nh = config.hidden_size, config.num_attention_heads
        self.nh, self.hd = nh, h // nh
        self.stride, self.window = config.compress_stride, config.compress_window
        self.local_window, self.theta = config.local_window, config.rope_theta
        self.rope_dims = config.rope_dims
        self.q_proj = nn.Linear(h, h, bias=False)
        self.k_proj = nn.Linear(h, h, bias=False)
        self.v_proj = nn.Linear(h, h, bias=False)
        self.o_proj = nn.Linear(h, h, bias=False)
        self.ck_proj = nn.Linear(h, h, bias=False)
        self.cv_proj = nn.Linear(h, h, bias=False)
        self.gate_proj = nn.Linear(h, nh, bias=False)
        self.gate_bias = nn.Parameter(torch.zeros(nh, config.compress_window))
        self.ck_norm = RMSNorm(self.hd, config.rms_norm_eps)
        # Query token shift: the query at t may read tokens t-1..t-query_shift
        # directly (the asked name sits a token or two before the answer).
        self.query_shift = config.query_shift
        if self.query_shift:
            self.shift_weight = nn.Parameter(torch.zeros(self.query_shift, h))

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.nh, self.hd)

    def compress(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Compressed keys and values, each ``(batch, heads, n_windows, head_dim)``."""
        t = x.shape[1]
        n = num_windows(t, stride=self.stride, window=self.window)
        starts = torch.arange(n, device=x.device) * self.stride
        idx = starts.unsqueeze(1) + torch.arange(self.window, device=x.device)  # (n, W)
        logits = self.gate_proj(x)[:, idx] + self.gate_bias.t()  # (B, n, W, nh)
        weights = logits.softmax(dim=2).unsqueeze(-1)
        ck = (weights * self._heads(self.ck_proj(x))[:, idx]).sum(2)  # (B, n, nh, hd)
        cv = (weights * self._heads(self.cv_proj(x))[:, idx]).sum(2)
        ck = self.ck_norm(ck).transpose(1, 2)
        ck = rope(ck, starts + self.window - 1, self.theta, self.rope_dims)
        return ck, cv.transpose(1, 2)

    def _shifted(self, x: torch.Tensor) -> torch.Tensor:
        """Query input: ``x[t] + sum_j w_j * x[t - j]`` for j = 1..query_shift."""
        out = x
        for j in range(1, self.query_shift + 1):
            prev = F.pad(x, (0, 0, j, 0))[:, : x.shape[1]]
            out = out + self.shift_weight[j - 1] * prev
        return out

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self._heads(self.q_proj(self._shifted(x))).transpose(1, 2)
        q = rope(q, positions, self.theta, self.rope_dims)
        k = rope(self._heads(self.k_proj(x)).transpose(1, 2), positions, self.theta, self.rope_dims)
        v = self._heads(self.v_proj(x)).transpose(1, 2)
        ck, cv = self.compress(x)
        # One joint softmax over [compressed windows | raw keys]: a fused
        # attention kernel with a boolean mask (True = may attend).
        visible = joint_mask(
            t, stride=self.stride, window=self.window, local_window=self.local_window
        ).to(x.device)
        out = F.scaled_dot_product_attention(
            q, torch.cat([ck, k], dim=2), torch.cat([cv, v], dim=2), attn_mask=visible
        )
        projected: torch.Tensor = self.o_proj(out.transpose(1, 2).reshape(b, t, -1))
        return projected


class Block(nn.Module):
    def __init__(self, config: PhaseRefConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.attn_norm = RMSNorm(h, config.rms_norm_eps)
        self.attn = CompressedAttention(config)
        self.mlp_norm = RMSNorm(h, config.rms_norm_eps)
        self.gate = nn.Linear(h, config.intermediate_size, bias=False)
        self.up = nn.Linear(h, config.intermediate_size, bias=False)
        self.down = nn.Linear(config.intermediate_size, h, bias=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), positions)
        y = self.mlp_norm(x)
        mlp: torch.Tensor = self.down(F.silu(self.gate(y)) * self.up(y))
        return x + mlp


class PhaseRefPreTrainedModel(PreTrainedModel):
    config_class = PhaseRefConfig
    base_model_prefix = "model"
    _no_split_modules = ["Block"]

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, RMSNorm):
            nn.init.ones_(module.weight)
        elif isinstance(module, CompressedAttention):
            nn.init.zeros_(module.gate_bias)
            if module.query_shift:
                nn.init.zeros_(module.shift_weight)


class PhaseRefModel(PhaseRefPreTrainedModel):
    def __init__(self, config: PhaseRefConfig) -> None:
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_init()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Final hidden states ``(batch, seq, hidden)``; position = index from 0."""
        t = input_ids.shape[1]
        if t > self.config.max_position_embeddings:
            raise ValueError(
                f"sequence of {t} tokens exceeds max_position_embeddings="
                f"{self.config.max_position_embeddings}; shorten the prompt"
            )
        positions = torch.arange(t, device=input_ids.device)
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, positions)
        normed: torch.Tensor = self.norm(x)
        return normed


class PhaseRefForCausalLM(PhaseRefPreTrainedModel, GenerationMixin):
    """Causal LM head over :class:`PhaseRefModel`; no KV cache (full recompute)."""

    def __init__(self, config: PhaseRefConfig) -> None:
        super().__init__(config)
        self.model = PhaseRefModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        embed: nn.Embedding = self.model.embed_tokens
        return embed

    def set_input_embeddings(self, value: nn.Module) -> None:
        if not isinstance(value, nn.Embedding):
            raise TypeError(
                f"input embeddings must be a torch.nn.Embedding, got {type(value).__name__}"
            )
        self.model.embed_tokens = value

    def prepare_inputs_for_generation(
        self, input_ids: torch.Tensor, **kwargs: Any
    ) -> dict[str, Any]:
        # No cache: every step sees the whole sequence from position 0.
        return {"input_ids": input_ids}

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> CausalLMOutputWithPast:
        logits = self.lm_head(self.model(input_ids))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]),
                labels[:, 1:].reshape(-1),
                ignore_index=-100,
            )
        return CausalLMOutputWithPast(loss=loss, logits=logits)
