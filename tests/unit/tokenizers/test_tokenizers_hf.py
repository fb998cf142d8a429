"""The Hugging Face adapter on small hand-built tokenizers (no files, no downloads)."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from phaseaware.errors import TemplateError, TokenizerError  # noqa: E402
from phaseaware.tokenizers.hf import (  # noqa: E402
    HFTokenizer,
    _starts_from_offsets,
    byte_level_alphabet,
)


def word_level(*, template: str | None = None, add_bos: bool = False) -> HFTokenizer:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = ["<s>", "</s>", "<unk>", "<sep>", "alpha", "beta", "gamma"]
    core = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    core.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in words[:4]])
    if add_bos:
        core.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", 0)]
        )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    if template is not None:
        tok.chat_template = template
    return HFTokenizer(tok, spec="test:word-level")


def test_offsets_fallback_gives_gaps_to_the_next_token():
    tokenizer = word_level()
    tokenized = tokenizer.tokenize("alpha  beta\n<sep>gamma")
    assert tokenized.ids == (4, 5, 3, 6)
    # the two spaces belong to "beta", the newline to "<sep>"
    assert tokenized.starts == (0, 5, 11, 17)


@pytest.mark.parametrize(
    "offsets, starts",
    [
        ([], ()),
        ([(0, 5), (6, 11)], (0, 5)),  # "Ġworld" reported without its space
        ([(0, 1), (1, 2), (1, 2), (1, 2)], (0, 1, 1, 1)),  # one char split over three tokens
        ([(0, 2), (2, 2), (2, 4)], (0, 2, 2)),  # zero-width token
        ([(3, 4)], (0,)),  # leading text no token claims (trimmed whitespace)
    ],
)
def test_starts_from_offsets(offsets, starts):
    assert _starts_from_offsets(offsets) == starts


def test_byte_level_alphabet_is_a_bijection():
    alphabet = byte_level_alphabet()
    assert sorted(alphabet.values()) == list(range(256))
    assert alphabet["Ġ"] == ord(" ") and alphabet["Ċ"] == ord("\n") and alphabet["a"] == ord("a")


def test_bos_counts_only_if_the_model_sees_it():
    assert word_level().bos_text == ""
    assert word_level(add_bos=True).bos_text == "<s>"
    assert word_level(template="{{ bos_token }}{{ messages[0]['content'] }}").bos_text == "<s>"
    assert word_level().eos_text == "</s>"


def test_encode_never_adds_bos():
    tokenizer = word_level(add_bos=True)
    assert tokenizer.encode("alpha") == [4]
    assert tokenizer.encode("<s> alpha") == [0, 4]


def test_render_chat_errors_are_template_errors():
    assert word_level().chat_template is None
    with pytest.raises(TemplateError, match="no chat template"):
        word_level().render_chat([{"role": "user", "content": "x"}])
    broken = word_level(template="{{ raise_exception('no system role') }}")
    with pytest.raises(TemplateError, match="no system role"):
        broken.render_chat([{"role": "user", "content": "x"}])


def test_slow_tokenizers_are_rejected():
    class Slow:
        is_fast = False

    with pytest.raises(TokenizerError, match="fast"):
        HFTokenizer(Slow(), spec="hf:slow")


def test_fingerprint_depends_on_the_vocabulary():
    a, b = word_level(), word_level(add_bos=True)
    assert a.fingerprint() == b.fingerprint()  # same vocabulary, different post-processing
    assert a.fingerprint() == a.fingerprint()
