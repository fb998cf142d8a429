"""Cold start: loading a tokenizer (and assembling) imports no torch; transformers only for
Jinja chat templates. The ``tokenizers``-only load equals the transformers load exactly."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from phaseaware.tokenizers import load_tokenizer, registry
from phaseaware.tokenizers.hf import HFTokenizer
from phaseaware.tokenizers.hf_files import read_tokenizer_folder
from tests.support.fingerprint_reference import slow_fingerprint

ROOT = Path(__file__).resolve().parents[3]


def _modules_after(code: str) -> set[str]:
    probe = (
        code
        + "\nimport sys; print(','.join(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = (
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
        )
        .stdout.strip()
        .splitlines()
    )
    return set(filter(None, out[-1].split(","))) if out else set()


def test_loading_each_tokenizer_imports_no_torch() -> None:
    specs = ["tiktoken:cl100k_base", "tiktoken:o200k_base", "deepseek-v4", "reference",
             f"hf:{registry.deepseek_v4_dir()}"]  # fmt: skip
    code = (
        "import sys\n"
        "from phaseaware.tokenizers import load_tokenizer\n"
        f"for spec in {specs!r}:\n"
        "    t = load_tokenizer(spec); t.encode('hello world'); t.fingerprint(); t.tokenize('a b')\n"
        "    assert 'torch' not in sys.modules and 'transformers' not in sys.modules, spec"
    )
    assert _modules_after(code) == set()


def test_assemble_example_imports_no_torch_nor_transformers() -> None:
    code = (
        "import contextlib, io\n"
        "from phaseaware.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['assemble', 'examples/request.json', '--json'])"
    )
    assert _modules_after(code) == set()


@pytest.mark.parametrize("spec", ["deepseek-v4", "reference"])
def test_tokenizers_only_load_equals_the_transformers_load(spec) -> None:
    transformers = pytest.importorskip("transformers")
    folder = registry.deepseek_v4_dir() if spec == "deepseek-v4" else registry.REFERENCE_MODEL_DIR
    fast = load_tokenizer(spec)
    assert isinstance(fast, HFTokenizer) and fast.hf_tokenizer is not None
    auto = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    slow = HFTokenizer(auto, spec=spec, bos_text=fast.bos_text if spec == "deepseek-v4" else None)
    assert fast.fingerprint() == slow.fingerprint()
    assert (fast.bos_text, fast.eos_text, fast.chat_template) == (
        slow.bos_text, slow.eos_text, slow.chat_template,
    )  # fmt: skip
    texts = [
        "Hello world", " leading space\n\ttabs  ", "日本語のテキスト 😀👍🏽 İstanbul ß",
        fast.bos_text + "x" + fast.eos_text, "<|user|> hi <|assistant|>", "3.62 volts, 1,000",
    ]  # fmt: skip
    assert fast.tokenize_batch(texts) == slow.tokenize_batch(texts)
    for text in texts:
        assert fast.encode(text) == slow.encode(text)
        assert fast.decode(fast.encode(text)) == slow.decode(slow.encode(text))


def test_reference_chat_template_renders_through_transformers_lazily() -> None:
    code = (
        "from phaseaware.tokenizers import load_tokenizer\n"
        "t = load_tokenizer('reference')\n"
        "assert t.chat_template\n"
        "import sys; assert 'transformers' not in sys.modules\n"
        "print(t.render_chat([{'role': 'user', 'content': 'hi'}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert "hi" in done.stdout


def test_a_folder_transformers_would_change_falls_back(tmp_path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(registry.REFERENCE_MODEL_DIR / name, tmp_path / name)
    assert read_tokenizer_folder(tmp_path) is not None
    config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["additional_special_tokens"] = ["<|not-in-tokenizer-json|>"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    assert read_tokenizer_folder(tmp_path) is None  # transformers adds the token: use it
    config.pop("additional_special_tokens")
    config["add_bos_token"] = True  # the post-processor adds no BOS: transformers would
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    assert read_tokenizer_folder(tmp_path) is None


@pytest.mark.parametrize("spec", ["deepseek-v4", "reference"])
def test_fast_fingerprint_and_byte_tables_equal_the_slow_ones(spec) -> None:
    from phaseaware.tokenizers.hf_vocab import build_byte_tables, byte_level_alphabet

    backend = load_tokenizer(spec)._backend
    assert load_tokenizer(spec).fingerprint() == slow_fingerprint(backend)
    pieces, lengths = build_byte_tables(backend)
    if pieces is None:
        assert type(backend.decoder).__name__ != "ByteLevel"
        return
    alphabet = byte_level_alphabet()
    added = {i: t.content for i, t in backend.get_added_tokens_decoder().items()}
    for token, token_id in backend.get_vocab(with_added_tokens=True).items():
        if token_id in added:
            expected = added[token_id].encode("utf-8")
        else:
            try:
                expected = bytes(alphabet[c] for c in token)
            except KeyError:
                expected = token.encode("utf-8")
        assert pieces[token_id] == expected and lengths[token_id] == len(expected)
