"""The DeepSeek-V4 tokenizer files with another chat template (offline; nothing downloaded).

The ``hf`` format renders a tokenizer's Jinja template; tests of templates that the
DeepSeek-V4 folder does not carry (SmolLM2's, Qwen2.5's, hand-written ones) set the
template on a copy of that tokenizer, as ``tokenizer.chat_template = ...`` does.
"""

from __future__ import annotations

from phaseaware.tokenizers.hf import HFTokenizer

__all__ = ["deepseek_with_template"]


def deepseek_with_template(
    chat_template: str, *, spec: str = "deepseek-v4+template"
) -> HFTokenizer:
    """An :class:`HFTokenizer` of the DeepSeek-V4 files whose chat template is ``chat_template``."""
    from transformers import AutoTokenizer

    from phaseaware.tokenizers.registry import DEEPSEEK_V4_BOS, deepseek_v4_dir

    hf = AutoTokenizer.from_pretrained(str(deepseek_v4_dir()), local_files_only=True)
    hf.chat_template = chat_template
    return HFTokenizer(hf, spec=spec, bos_text=DEEPSEEK_V4_BOS)
