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
# prompt); an assistant turn as " <|assistant|> CONTENT <eos>". The model knows no system
# role: system (and developer) messages before the first user message are folded into it,
# "<|user|> SYSTEM USER" (space-joined, in order); one anywhere else is an error that says so.
_FOLD_ERROR = (
    "the reference model has no system role: system messages are folded into the first user "
    "message, so they must come before it (put them first, followed by a user message)"
)
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% set ns = namespace(system=none, turns=0) %}"
    "{% for message in messages %}"
    "{% if message['role'] in ['system', 'developer'] %}"
    "{% if ns.turns > 0 %}{{ raise_exception('" + _FOLD_ERROR + "') }}{% endif %}"
    "{% set ns.system = message['content'] if ns.system is none"
    " else ns.system + ' ' + message['content'] %}"
    "{% elif message['role'] == 'user' %}"
    "{{ ' <|user|> ' }}"
    "{% if ns.system is not none and ns.turns == 0 %}{{ ns.system + ' ' }}{% endif %}"
    "{{ message['content'] }}"
    "{% set ns.turns = ns.turns + 1 %}"
    "{% elif message['role'] == 'assistant' %}"
    "{% if ns.system is not none and ns.turns == 0 %}{{ raise_exception('" + _FOLD_ERROR + "') }}"
    "{% endif %}"
    "{{ ' <|assistant|> ' + message['content'] + ' ' + eos_token }}"
    "{% set ns.turns = ns.turns + 1 %}"
    "{% else %}"
    "{{ raise_exception('the reference model only knows the user and assistant roles "
    "(system messages fold into the first user message), not ' + message['role']) }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if ns.system is not none and ns.turns == 0 %}{{ raise_exception('" + _FOLD_ERROR + "') }}"
    "{% endif %}"
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
