"""Build the reference model's word-level tokenizer from the task vocabulary.

Every task word (names, numbers, filler, punctuation) is exactly one token;
text is split on whitespace, and the special tokens below are parsed from the
text wherever they appear. ``decode`` joins tokens with single spaces, so the
task text (words separated by single spaces) round-trips exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from phaseaware.calibration.task import vocabulary

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "UNK",
    "USER",
    "ASSISTANT",
    "SPECIAL_TOKENS",
    "CHAT_TEMPLATE",
    "build_tokenizer",
    "save_tokenizer",
]

BOS, EOS, PAD, UNK = "<bos>", "<eos>", "<pad>", "<unk>"
USER, ASSISTANT = "<|user|>", "<|assistant|>"
SPECIAL_TOKENS: tuple[str, ...] = (BOS, EOS, PAD, UNK, USER, ASSISTANT)

# One user turn renders as "<bos> <|user|> CONTENT <|assistant|>" (the generation
# prompt); an assistant turn as " <|assistant|> CONTENT <eos>".
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}"
    "{{ ' <|user|> ' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ ' <|assistant|> ' + message['content'] + ' ' + eos_token }}"
    "{% else %}"
    "{{ raise_exception('the reference model only knows the user and assistant roles, "
    "not ' + message['role']) }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ ' <|assistant|>' }}{% endif %}"
)


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A ``PreTrainedTokenizerFast``: ids 0-5 are the specials, then the task words."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = list(SPECIAL_TOKENS) + [w for w in vocabulary() if w not in SPECIAL_TOKENS]
    vocab = {w: i for i, w in enumerate(words)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    core.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=[USER, ASSISTANT],
        model_max_length=512,
        padding_side="right",
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def save_tokenizer(directory: str | Path) -> PreTrainedTokenizerFast:
    """Build the tokenizer and save it (tokenizer.json + config files) into ``directory``."""
    tok = build_tokenizer()
    tok.save_pretrained(str(directory))
    return tok
