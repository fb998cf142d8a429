"""One base prompt of the calibration probes, and how its pad zones are fitted.

A :class:`BasePrompt` holds the seeded content of one base prompt (records,
filler sentences, question) and renders it with any :class:`Zones` (pad tokens at
the context start, before and after the target record, at the end).
:func:`measure` re-tokenizes a rendering and reads off its length, key position
and question position; :func:`fit_base` finds the zones of the offset-0 prompt
(length exactly ``context_tokens``, key ``≡ 0 (mod n_offsets)``, or the base prompt's
own residue when the settings spread the keys),
:func:`fit_window` those of the window sweep, and :func:`variants` the zones and
expected positions of every offset of a sweep. :class:`PadMismatch` means a pad
scheme did not count exactly (the probe builder then tries the next one).
Positions are absolute token indices (BOS = 0); lengths are in tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from phaseaware.calibration import task
from phaseaware.calibration.probe_settings import ProbeSettings
from phaseaware.chat.layout import PromptLayout, with_system
from phaseaware.errors import CalibrationError
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "Zones",
    "PadMismatch",
    "BasePrompt",
    "Fit",
    "measure",
    "fit_base",
    "fit_window",
    "variants",
    "pad_schemes",
]

_KEY_PREFIX = "The access code for "


@dataclass(frozen=True)
class Zones:
    """Pad tokens in each zone: at the context start, before/after the target, at the end.

    ``target_last``: the target record follows every filler sentence and
    distractor record (window sweep) instead of sitting at the base's depth.
    """

    pre: int
    before: int
    after: int
    end: int
    target_last: bool = False


class PadMismatch(Exception):
    pass


class BasePrompt:
    """The seeded content of one base prompt; renders any zone configuration."""

    def __init__(self, settings: ProbeSettings, base_index: int, layout: PromptLayout) -> None:
        rng = np.random.default_rng([settings.seed, base_index])
        n_rec = settings.distractors + 1
        names = rng.choice(len(task.NAMES), size=n_rec, replace=False)
        numbers = rng.choice(len(task.NUMBERS), size=n_rec, replace=False)
        self.name, self.answer = task.NAMES[names[0]], task.NUMBERS[numbers[0]]
        self.target = task.record_text(self.name, self.answer)
        self.distractors = [
            task.record_text(task.NAMES[n], task.NUMBERS[v])
            for n, v in zip(names[1:], numbers[1:], strict=True)
        ]
        self.depth = float(rng.uniform(*settings.depth))
        self.slots = rng.uniform(0.0, 1.0, size=settings.distractors).tolist()
        self.sentences = [
            task.filler_sentence(rng) for _ in range(settings.context_tokens // 4 + 8)
        ]
        self.nouns = [str(w) for w in rng.choice(task.FILLER_WORDS["noun"], size=64)]
        self.question = task.question_text(self.name)
        # the system prompt joins the single-turn conversation (rendered as given, as before)
        self.layout = with_system(layout, settings.system)
        self.n_sentences = 0
        self.pad_words: list[str] = []
        self.key_residue = settings.key_residue(base_index)  # the offset-0 key's, mod n_offsets

    def _zone(self, k: int, start: int) -> list[str]:
        if k <= 0:
            return []
        words = [self.pad_words[(start + i) % len(self.pad_words)] for i in range(k - 1)]
        return [*words, "."]

    def render(self, zones: Zones) -> tuple[Any, int, int]:
        """Rendered prompt, char offset of the target's key, char offset of the question."""
        s = self.n_sentences
        at = s if zones.target_last else round(self.depth * s)
        before = self.sentences[:at]
        after = self.sentences[at:s]
        for record, slot in zip(self.distractors, self.slots, strict=True):
            index = round(slot * s)
            if index <= at:
                before.insert(min(index, len(before)), record)
            else:
                after.insert(min(index - at, len(after)), record)
        pieces = [
            *self._zone(zones.pre, 0),
            *before,
            *self._zone(zones.before, 11),
        ]
        key_char = len(" ".join(pieces)) + (1 if pieces else 0) + len(_KEY_PREFIX)
        pieces += [self.target, *self._zone(zones.after, 23), *after, *self._zone(zones.end, 37)]
        context = " ".join(pieces)
        rendered = self.layout.render(system=None, context=context, question=self.question)
        query_char = rendered.text.index(self.question, rendered.context_end)
        return rendered, rendered.context_start + key_char, query_char


def measure(tokenizer: Tokenizer, base: BasePrompt, zones: Zones) -> tuple[Any, int, int, int]:
    """(rendered, prompt tokens, key position, query position) by re-tokenizing."""
    rendered, key_char, query_char = base.render(zones)
    tokens = tokenizer.tokenize(rendered.text)
    key = tokens.token_at_char(key_char)
    if not rendered.text.startswith(base.name, key_char):
        raise PadMismatch(f"key char offset {key_char} does not hold {base.name!r}")
    return rendered, len(tokens), key, tokens.token_at_char(query_char)


def fit_base(
    tokenizer: Tokenizer, base: BasePrompt, settings: ProbeSettings
) -> tuple[Zones, int, int]:
    """Zones of the offset-0 prompt: length exactly N, key ≡ ``base.key_residue`` (mod
    n_offsets; 0 unless the settings spread the keys)."""
    n, m = settings.context_tokens, settings.n_offsets
    target = base.key_residue
    c = m - 1
    per_sentence = max(1, len(tokenizer.encode(" " + base.sentences[0])))
    base.n_sentences = 0
    _, empty, _, _ = measure(tokenizer, base, Zones(0, 0, c, 0))
    if empty + c > n:
        raise CalibrationError(
            f"--context-tokens {n} is too small: the records, question and template alone take "
            f"{empty + c} tokens; use at least {empty + c + 2 * m}"
        )
    base.n_sentences = min(len(base.sentences), max(0, (n - empty - c) // per_sentence))
    for _ in range(len(base.sentences) + 8):
        _, length, key, _ = measure(tokenizer, base, Zones(0, 0, c, 0))
        pre = (target - key) % m
        end = n - length - pre
        if end < 0 and base.n_sentences > 0:
            base.n_sentences -= 1
        elif end > per_sentence + m and base.n_sentences < len(base.sentences):
            base.n_sentences += 1
        elif end < 0:
            raise CalibrationError(f"--context-tokens {n} is too small; use at least {length + m}")
        else:
            break
    zones = Zones(pre, 0, c, end)
    for _ in range(4):  # a few corrections if zone tokens interact with their neighbours
        _, length, key, query = measure(tokenizer, base, zones)
        if length == n and key % m == target:
            return zones, key, query
        pre = (zones.pre + target - key) % m
        zones = Zones(pre, 0, c, zones.end + (n - length) - (pre - zones.pre))
        if zones.end < 0:
            break
    raise PadMismatch(f"cannot reach exactly {n} tokens with key residue {target}")


Fit = tuple[Zones, int, int]  # zones, key position, query position


def fit_window(
    tokenizer: Tokenizer, base: BasePrompt, settings: ProbeSettings, fitted: Fit, base_index: int
) -> tuple[Zones, int, int, int]:
    """Zones of the window sweep's offset 0: target record last, length exactly N + j.

    Starts from the key sweep's fit (same sentences) and moves all of its pad
    tokens to the context start, plus ``j = base_index mod n_offsets`` more, so
    that over the base prompts the window probes' keys fall on every residue
    (inside a window a key's distance and residue are tied by the prompt
    length); offset ``k`` then moves ``k`` of them to just after the record.
    Returns (zones, prompt length, key position, query position).
    """
    m = settings.n_offsets
    extra = base_index % m
    n = settings.context_tokens + extra
    zones, _, query0 = fitted
    pre = zones.pre + zones.before + zones.after + zones.end + extra
    for _ in range(4):  # a few corrections if the moved zone interacts with its neighbours
        if pre < m - 1:
            break
        zones = Zones(pre, 0, 0, 0, target_last=True)
        _, length, key, query = measure(tokenizer, base, zones)
        if length == n and query == query0 + extra:
            return zones, n, key, query
        pre += n - length
    raise PadMismatch(f"window sweep: cannot reach exactly {n} tokens with the target record last")


def variants(
    tokenizer: Tokenizer,
    base: BasePrompt,
    settings: ProbeSettings,
    sweep: str,
    fitted: Fit,
    base_index: int,
) -> Iterator[tuple[int, Zones, tuple[int, int, int]]]:
    """(offset, zones, expected (length, key position, query position)) of one sweep."""
    n = settings.context_tokens
    if sweep == "window":
        zones, n_window, key0, query0 = fit_window(tokenizer, base, settings, fitted, base_index)
        for k in range(settings.n_offsets):
            variant = Zones(zones.pre - k, 0, k, 0, target_last=True)
            yield k, variant, (n_window, key0 - k, query0)
        return
    zones, key0, query0 = fitted
    for k in range(settings.n_offsets):
        if sweep == "key":
            yield k, Zones(zones.pre, k, zones.after - k, zones.end), (n, key0 + k, query0)
        else:
            yield k, Zones(zones.pre, 0, zones.after + k, zones.end), (n + k, key0, query0 + k)


def pad_schemes(tokenizer: Tokenizer, base: BasePrompt) -> Iterator[list[str]]:
    """Pad word lists to try: seeded single-token nouns, then dots only."""
    single = [w for w in base.nouns if len(tokenizer.encode(" " + w)) == 1]
    if single:
        yield single
    yield ["."]
