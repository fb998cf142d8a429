"""Configuration of the reference model (a transformers ``PretrainedConfig``)."""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

__all__ = ["PhaseRefConfig"]


class PhaseRefConfig(PretrainedConfig):
    """Sizes of the reference model; lengths and positions are in tokens.

    Compression: window ``j`` covers absolute positions ``[j*compress_stride,
    j*compress_stride + compress_window)``; positions count from 0 (BOS = 0).
    ``local_window`` raw keys are visible to each query (itself included).
    ``query_shift``: how many previous tokens are mixed (learned per-channel
    weights, starting at zero) into the input of each query projection; keys
    and values never see it. ``rope_dims``: how many dimensions of each head
    are rotated (the first ones; the rest carry content only, as in DeepSeek's
    decoupled RoPE); ``None`` rotates all of them.
    """

    model_type = "phaseaware-ref"

    def __init__(
        self,
        vocab_size: int = 512,
        hidden_size: int = 128,
        num_hidden_layers: int = 4,
        num_attention_heads: int = 4,
        intermediate_size: int = 256,
        compress_stride: int = 8,
        compress_window: int = 8,
        local_window: int = 16,
        query_shift: int = 0,
        rope_dims: int | None = None,
        rope_theta: float = 10000.0,
        max_position_embeddings: int = 512,
        rms_norm_eps: float = 1e-5,
        initializer_range: float = 0.02,
        bos_token_id: int = 0,
        eos_token_id: int = 1,
        pad_token_id: int = 2,
        tie_word_embeddings: bool = False,
        **kwargs: Any,
    ) -> None:
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size={hidden_size} must be divisible by "
                f"num_attention_heads={num_attention_heads}"
            )
        if compress_window < compress_stride:
            raise ValueError(
                f"compress_window={compress_window} must be >= compress_stride={compress_stride}"
            )
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.compress_stride = compress_stride
        self.compress_window = compress_window
        self.local_window = local_window
        self.query_shift = query_shift
        self.rope_dims = rope_dims
        self.rope_theta = rope_theta
        self.max_position_embeddings = max_position_embeddings
        self.rms_norm_eps = rms_norm_eps
        self.initializer_range = initializer_range
        kwargs.setdefault("use_cache", False)
        # PreTrainedConfig.__init__ is wrapped at runtime by huggingface_hub's
        # @strict(accept_kwargs=True), which accepts these token/tying kwargs; mypy
        # only sees the dataclass fields, so the call is flagged as call-arg.
        super().__init__(  # type: ignore[call-arg]
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            pad_token_id=pad_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )
