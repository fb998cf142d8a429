"""phaseaware's plans for an SGLang target against SGLang 0.5.23's own render path.

500 random requests per format (:mod:`tests.support.sglang_fuzz`), id for id, through
SGLang's glue files and deepseek-recipe (:mod:`tests.support.sglang_glue`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.registry import deepseek_v4_dir
from tests.support.sglang_fuzz import fuzz, v41_tokenizer_dir


@pytest.mark.parametrize(("name", "seed"), [("deepseek-v4", 11), ("deepseek-v4.1", 12)])
def test_every_prompt_is_sglangs(name: str, seed: int, tmp_path: Path) -> None:
    folder = deepseek_v4_dir() if name == "deepseek-v4" else v41_tokenizer_dir(tmp_path)
    tokenizer = load_tokenizer(f"hf:{folder}")
    result = fuzz(name, tokenizer, str(folder / "tokenizer.json"), n=500, seed=seed)
    print("\n".join(result.lines(name, 500)))
    assert not result.bad, "\n".join(result.bad[:10])
    # most requests render (V4 refuses every numeric effort); each refusal is SGLang's too
    assert result.counts["same ids"] >= 300
