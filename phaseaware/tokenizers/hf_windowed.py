r"""Windowed verification for a byte-level Hugging Face tokenizer: DeepSeek-V4's config.

``hf_window_rule(backend)`` says whether the cut rule below is sound for an
:class:`HFTokenizer` and returns it; any other configuration (another
pre-tokenizer, a normalizer, added tokens that strip, ...) gets a reason and
is encoded in full. It reads the backend's config through the adapter's
``backend`` (the ``tokenizers.Tokenizer``) and compares it, component by
component, with DeepSeek-V4's ``tokenizer.json``:

- normalizer: none, or an empty ``Sequence``; truncation and padding: none;
- pre-tokenizer: exactly ``Sequence[Split(D), Split(K), Split(M), ByteLevel]``
  with ``D = \p{N}{1,3}``, ``K = [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+``, ``M``
  the main regex (below), every split ``Isolated``, ByteLevel without regex or
  prefix space;
- model BPE without dropout, decoder ByteLevel (token starts then come from the
  exact bytes per id, ``hf.py``'s byte tables), every byte-level character in the
  vocabulary (so no character is ever dropped: every encode round-trips);
- post-processor none or ByteLevel (and ``hf.py`` always encodes with
  ``add_special_tokens=False``): nothing is added to an encoding;
- added tokens: none strips or is single-word, each is at least 3 characters.

``M = [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
| ?[\p{P}\p{S}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+`` (alternatives 1-6).

Soundness. ``tokenizers`` encodes ``T`` by (i) splitting out added-token
occurrences (leftmost-longest, non-overlapping; first the non-normalized
tokens, then the normalized ones in the remaining pieces: the normalizer is
the identity), (ii) applying each Split to every remaining piece (Isolated: a
piece becomes its matches and the stretches between them), (iii) BPE on each
final piece alone. Let ``x = T[p-1]``, ``y = T[p]``. ``p`` is a cut when:

- (A) no added-token content holds ``xy`` (the rule removes those pairs). An
  occurrence crossing ``p`` would hold ``xy``; so the occurrences starting before
  ``p`` are those of ``T[:p]``, the rest those of ``T[p:]``, and the
  leftmost-longest scan picks the same ones in ``T`` as in the two halves.
- (B) some Split makes ``p`` a piece boundary, and every Split before it has no
  match crossing ``p`` and is *local*: its attempts starting before ``p`` read at
  most ``y`` and treat ``y`` as they treat the end of text (no lookbehind exists,
  so attempts from ``p`` read ``T[p:]`` only). Then, split by split, the pieces
  of ``T`` cut at ``p`` are those of ``T[:p]`` followed by those of ``T[p:]``;
  once ``p`` is a boundary, later splits act on each side alone, and BPE never
  crosses it.

The rule's pairs (ASCII or fixed code-point ranges only: nothing depends on the
Unicode version of Python's ``regex`` vs onig, beyond "no character of ``K`` is
``\p{N}``", and unassigned code points of ``K`` are left out of ``C`` below):

1. ``x`` in ``[A-Za-z]``, ``y`` ASCII and not ``[A-Za-z]``. D: ``x`` is no digit,
   so no match crosses ``p``; a digit run left of ``p`` stops at ``x``. K: neither
   is in ``K``. M: the match holding ``x`` is alternative 1's ``[A-Za-z]+`` or
   alternative 2's ``[\p{L}\p{M}]+`` (``x`` is not a prefix, punctuation or
   space), both greedy and stopped by ``y`` (ASCII: no letter, no mark) as by the
   end of text; ``x`` is always covered (alternative 2 matches at ``x``), so the
   match ends at ``p``. The other alternatives cannot reach ``x``, so they read
   no further than it, and ``(?!\S)`` looks only at a whitespace run's next
   character, at most ``x``.
2. ``x == "\n"``, ``y`` in ``[A-Za-z0-9]``. D, K as in 1. M: alternatives 1, 2
   cannot hold ``x`` (the prefix excludes ``\r\n``); 3's ``[\r\n]*`` and 4's
   ``\s*[\r\n]+`` stop at ``y`` as at the end of text; a start in the whitespace
   run ending at ``x`` takes 4 before 5 or 6 are tried (4 always succeeds there,
   ending at ``p``: its ``\s*`` gives back ``x`` to ``[\r\n]+``), so the run's match
   ends at ``p`` in ``T`` and in ``T[:p]``, and ``\s+(?!\S)`` never sees ``y``.
3. ``x`` in ``C`` (``K`` without its unassigned code points; none is ``\p{N}``)
   and ``y`` not in ``K``, or ``x`` not in ``K`` and ``y`` in ``C``. D: one side is
   no digit, so no match crosses ``p``; runs left of ``p`` stop at ``x`` or ``y``.
   K: the run holding the ``K`` side ends (starts) at ``p``, and a run left of
   ``p`` stops at ``y`` as at the end of text; ``p`` is a boundary after K.
4. One of ``x``, ``y`` is in ``[0-9]`` and the other is ASCII and not, or one of
   ``、。「」『』【】！（），：；？`` (punctuation in every Unicode version). D: the
   digit run holding the digit side ends (starts) at ``p``: D's greedy groups of
   at most 3 cover the whole run from its start, and the other side (no
   ``\p{N}``) stops a group as the end of text does; so ``p`` is a boundary
   after D already.

Starts: every token's bytes are exact (byte tables), and a cut lies between
characters, so the char starts of ``T[p:]``'s tokens are those of ``T[p:]``
alone plus ``p``. Added tokens inside a core need no special care: an
occurrence there lies between the core's cuts, so (A) makes it the same
occurrence in every text that holds the core.

Joins (``joined``): pieces are joined by two-character stand-ins so that both
seams are cut pairs of the original text; an added-token occurrence holding
the stand-in's own pair is at least 3 characters long, so it would also hold
a seam pair, which (A) excludes. So each joined encode is its pieces' encodes.
The property test ``tests/unit/assembly/test_stitch_properties.py`` checks
``stitched == full`` for this tokenizer on adversarial boundaries.
"""

from __future__ import annotations

import json
from typing import Any

from phaseaware.tokenizers.cuts import CutRule, pair_cuts
from phaseaware.tokenizers.hf_vocab import byte_level_alphabet

__all__ = ["DEEPSEEK_V4_PRE_TOKENIZER", "hf_window_rule"]

_MAIN = (
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)
DEEPSEEK_V4_PRE_TOKENIZER: dict[str, Any] = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated",
         "invert": False},
        {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"},
         "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": _MAIN}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": False},
    ],
}  # fmt: skip

_K = "\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff"  # the second split's class
_C = "\u4e00-\u9fa5\u3041-\u3096\u3099-\u309f\u30a0-\u30ff"  # _K less U+3040, U+3097, U+3098
_ASCII_NON_LETTER = "\\x00-\\x40\\x5b-\\x60\\x7b-\\x7f"
# ASCII but 0-9, and CJK / fullwidth punctuation (general category P in every Unicode version)
_NON_DIGIT = (
    "\\x00-\\x2f\\x3a-\\x7f"
    "\u3001\u3002\u300c-\u300f\u3010\u3011\uff01\uff08\uff09\uff0c\uff1a\uff1b\uff1f"
)
_RULES = (
    f"(?<=[A-Za-z])(?=[{_ASCII_NON_LETTER}])",
    "(?<=\\n)(?=[A-Za-z0-9])",
    f"(?<=[{_C}])(?=[^{_K}])",
    f"(?<=[^{_K}])(?=[{_C}])",
    f"(?<=[0-9])(?=[{_NON_DIGIT}])|(?<=[{_NON_DIGIT}])(?=[0-9])",
)
_MIN_ADDED = 3


def hf_window_rule(backend: Any) -> tuple[str | None, CutRule | None]:
    """(None, the cut rule) when windowed verification is sound for the Rust tokenizer
    ``backend``; else (why not, None). ``HFTokenizer.window_recipe`` decides it once per
    tokenizer object."""
    reason, forbidden = _check(backend)
    return (reason, None) if reason is not None else (None, pair_cuts(_RULES, forbidden))


def _state(component: Any) -> Any:
    return None if component is None else json.loads(component.__getstate__())


def _check(backend: Any) -> tuple[str | None, set[str]]:
    normalizer = _state(backend.normalizer)
    if normalizer not in (None, {"type": "Sequence", "normalizers": []}):
        return "the tokenizer has a normalizer", set()
    if _state(backend.pre_tokenizer) != DEEPSEEK_V4_PRE_TOKENIZER:
        return "the windowed argument is made for DeepSeek-V4's pre-tokenizer config only", set()
    model = backend.model
    if type(model).__name__ != "BPE" or model.dropout is not None:
        return "the model is not BPE without dropout", set()
    if type(backend.decoder).__name__ != "ByteLevel":
        return "the decoder is not ByteLevel (token starts need exact bytes per id)", set()
    if any(backend.token_to_id(c) is None for c in byte_level_alphabet()):
        return "some byte-level character is not in the vocabulary", set()
    post = backend.post_processor
    if post is not None and type(post).__name__ != "ByteLevel":
        return "the post-processor is not ByteLevel", set()
    if backend.truncation is not None or backend.padding is not None:
        return "truncation or padding is enabled", set()
    forbidden: set[str] = set()
    for token in backend.get_added_tokens_decoder().values():
        content = str(token.content)
        if token.lstrip or token.rstrip or token.single_word:
            return f"added token {content!r} strips or matches single words", set()
        if len(content) < _MIN_ADDED:
            return f"added token {content!r} is shorter than {_MIN_ADDED} characters", set()
        forbidden.update(content[i : i + 2] for i in range(len(content) - 1))
    return None, forbidden
