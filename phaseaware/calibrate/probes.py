"""Needle-in-a-haystack probes with token-exact key positions and prompt lengths.

A *base prompt* is a haystack of seeded filler sentences holding key-value
records (one target, distractors with distinct names and numbers) followed by
the question, rendered through a layout (BOS/template included). Its length is
exactly ``context_tokens`` tokens of the run's tokenizer and its target key
token (the first token of the target's name) sits at an absolute position
``≡ 0 (mod n_offsets)``. Around the target record sit two *pad zones* of filler
words (one token each), ``before`` and ``after`` it:

* key sweep, offset ``k``: ``k`` pad tokens before the target record and ``k``
  fewer after it, so the key moves to residue ``k`` while the prompt length,
  the question's position and everything outside the zones stay fixed;
* length sweep, offset ``j``: ``j`` extra pad tokens after the target record,
  so the prompt length's residue moves while the key's position stays fixed;
* window sweep, offset ``k``: the target record comes last in the context
  (after every filler sentence and distractor record), followed by ``k`` pad
  tokens and then the question. All of the base prompt's pad tokens move to
  the context start (plus ``j = base_index mod n_offsets`` more, so that over
  the base prompts the in-window keys fall on every residue), ``k`` of them
  after the record, so the prompt stays exactly ``context_tokens + j`` long,
  the question keeps its position, and only the key's distance to the end
  (``prompt_tokens - key_position``) grows: ``d0 + k``, where ``d0`` (record
  tail + question + template) depends on the tokenizer and template. It
  measures retrieval inside a model's raw local window; ``ProbeSettings``
  leaves it out by default (the reference model's protocol includes it).

Every variant of a base prompt is evaluated (paired design). Nothing relies on
adding token counts: each variant is re-tokenized and its length, key position
(from the tokenizer's offsets) and question position are checked; a pad scheme
the tokenizer does not count exactly is replaced by the next one, and if none
fits a :class:`~phaseaware.errors.CalibrationError` is raised. The window
sweep picks its pad scheme on its own, so adding it never changes the key and
length probes. Probe ids are ``f"{sweep}:{base_index}:{offset}"``; everything is
seeded (``np.random.default_rng``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from phaseaware.calibrate import task
from phaseaware.calibrate.backends.base import ProbeRequest
from phaseaware.errors import CalibrationError
from phaseaware.layouts import PromptLayout
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "SWEEPS",
    "DEFAULT_SWEEPS",
    "ProbeSettings",
    "Probe",
    "ProbeGroup",
    "build_group",
    "iter_groups",
    "judge",
]

SWEEPS: tuple[str, ...] = ("key", "length", "window")
DEFAULT_SWEEPS: tuple[str, ...] = ("key", "length")
_KEY_PREFIX = "The access code for "


@dataclass(frozen=True)
class ProbeSettings:
    """What to probe. Lengths in tokens; ``depth`` is a fraction range of the haystack.

    ``n_offsets``: offsets ``0..n_offsets-1`` per sweep (the period, or the
    largest period considered when the period is detected).
    """

    context_tokens: int
    n_offsets: int
    base_prompts: int
    sweeps: tuple[str, ...] = DEFAULT_SWEEPS
    seed: int = 0
    distractors: int = 3
    max_tokens: int = 8
    depth: tuple[float, float] = (0.15, 0.6)
    system: str | None = None

    def __post_init__(self) -> None:
        if self.n_offsets < 1:
            raise CalibrationError(f"the period must be >= 1, got {self.n_offsets} (--period)")
        if self.base_prompts < 1:
            raise CalibrationError(
                f"need at least 1 base prompt, got {self.base_prompts} (--base-prompts)"
            )
        bad = [s for s in self.sweeps if s not in SWEEPS]
        if bad or not self.sweeps:
            raise CalibrationError(
                f"unknown sweeps {bad or '(none)'}; use --sweeps with names from "
                f"{','.join(SWEEPS)}, e.g. --sweeps key,length"
            )
        if not 0 <= self.distractors < len(task.NAMES):
            raise CalibrationError(f"distractors must be 0..{len(task.NAMES) - 1}")

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["sweeps"], doc["depth"] = list(self.sweeps), list(self.depth)
        return doc

    @property
    def probes_per_base(self) -> int:
        return self.n_offsets * len(self.sweeps)


@dataclass(frozen=True)
class Probe:
    """One prompt. Positions are absolute token indices (BOS = 0); lengths in tokens."""

    probe_id: str
    sweep: str
    base_index: int
    offset: int
    text: str
    messages: tuple[dict[str, str], ...] | None
    prompt_tokens: int
    key_position: int
    query_position: int
    answer: str
    target_name: str

    def request(self, *, max_tokens: int = 8) -> ProbeRequest:
        return ProbeRequest(
            probe_id=self.probe_id,
            prompt=self.text,
            prompt_tokens=self.prompt_tokens,
            answer=self.answer,
            messages=self.messages,
            max_tokens=max_tokens,
        )


@dataclass(frozen=True)
class ProbeGroup:
    """All variants of one base prompt (they share the prefix before the target record)."""

    base_index: int
    probes: tuple[Probe, ...]


def judge(probe: Probe, completion: str) -> bool:
    """Correct iff the first number in ``completion`` is the expected answer."""
    return task.extract_answer(completion) == probe.answer


@dataclass(frozen=True)
class _Zones:
    """Pad tokens in each zone: at the context start, before/after the target, at the end.

    ``target_last``: the target record follows every filler sentence and
    distractor record (window sweep) instead of sitting at the base's depth.
    """

    pre: int
    before: int
    after: int
    end: int
    target_last: bool = False


class _Mismatch(Exception):
    pass


class _Base:
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
        self.layout, self.system = layout, settings.system
        self.n_sentences = 0
        self.pad_words: list[str] = []

    def _zone(self, k: int, start: int) -> list[str]:
        if k <= 0:
            return []
        words = [self.pad_words[(start + i) % len(self.pad_words)] for i in range(k - 1)]
        return [*words, "."]

    def render(self, zones: _Zones) -> tuple[Any, int, int]:
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
        rendered = self.layout.render(system=self.system, context=context, question=self.question)
        query_char = rendered.text.index(self.question, rendered.context_end)
        return rendered, rendered.context_start + key_char, query_char


def _measure(tokenizer: Tokenizer, base: _Base, zones: _Zones) -> tuple[Any, int, int, int]:
    """(rendered, prompt tokens, key position, query position) by re-tokenizing."""
    rendered, key_char, query_char = base.render(zones)
    tokens = tokenizer.tokenize(rendered.text)
    key = tokens.token_at_char(key_char)
    if not rendered.text.startswith(base.name, key_char):
        raise _Mismatch(f"key char offset {key_char} does not hold {base.name!r}")
    return rendered, len(tokens), key, tokens.token_at_char(query_char)


def _fit(tokenizer: Tokenizer, base: _Base, settings: ProbeSettings) -> tuple[_Zones, int, int]:
    """Zones of the offset-0 prompt: length exactly N, key ≡ 0 (mod n_offsets)."""
    n, m = settings.context_tokens, settings.n_offsets
    c = m - 1
    per_sentence = max(1, len(tokenizer.encode(" " + base.sentences[0])))
    base.n_sentences = 0
    _, empty, _, _ = _measure(tokenizer, base, _Zones(0, 0, c, 0))
    if empty + c > n:
        raise CalibrationError(
            f"--context-tokens {n} is too small: the records, question and template alone take "
            f"{empty + c} tokens; use at least {empty + c + 2 * m}"
        )
    base.n_sentences = min(len(base.sentences), max(0, (n - empty - c) // per_sentence))
    for _ in range(len(base.sentences) + 8):
        _, length, key, _ = _measure(tokenizer, base, _Zones(0, 0, c, 0))
        pre = (-key) % m
        end = n - length - pre
        if end < 0 and base.n_sentences > 0:
            base.n_sentences -= 1
        elif end > per_sentence + m and base.n_sentences < len(base.sentences):
            base.n_sentences += 1
        elif end < 0:
            raise CalibrationError(f"--context-tokens {n} is too small; use at least {length + m}")
        else:
            break
    zones = _Zones(pre, 0, c, end)
    for _ in range(4):  # a few corrections if zone tokens interact with their neighbours
        _, length, key, query = _measure(tokenizer, base, zones)
        if length == n and key % m == 0:
            return zones, key, query
        pre = (zones.pre - key) % m
        zones = _Zones(pre, 0, c, zones.end + (n - length) - (pre - zones.pre))
        if zones.end < 0:
            break
    raise _Mismatch(f"cannot reach exactly {n} tokens with key residue 0")


_Fit = tuple[_Zones, int, int]  # zones, key position, query position


def _window_fit(
    tokenizer: Tokenizer, base: _Base, settings: ProbeSettings, fitted: _Fit, base_index: int
) -> tuple[_Zones, int, int, int]:
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
        zones = _Zones(pre, 0, 0, 0, target_last=True)
        _, length, key, query = _measure(tokenizer, base, zones)
        if length == n and query == query0 + extra:
            return zones, n, key, query
        pre += n - length
    raise _Mismatch(f"window sweep: cannot reach exactly {n} tokens with the target record last")


def _variants(
    tokenizer: Tokenizer,
    base: _Base,
    settings: ProbeSettings,
    sweep: str,
    fitted: _Fit,
    base_index: int,
) -> Iterator[tuple[int, _Zones, tuple[int, int, int]]]:
    """(offset, zones, expected (length, key position, query position)) of one sweep."""
    n = settings.context_tokens
    if sweep == "window":
        zones, n_window, key0, query0 = _window_fit(tokenizer, base, settings, fitted, base_index)
        for k in range(settings.n_offsets):
            variant = _Zones(zones.pre - k, 0, k, 0, target_last=True)
            yield k, variant, (n_window, key0 - k, query0)
        return
    zones, key0, query0 = fitted
    for k in range(settings.n_offsets):
        if sweep == "key":
            yield k, _Zones(zones.pre, k, zones.after - k, zones.end), (n, key0 + k, query0)
        else:
            yield k, _Zones(zones.pre, 0, zones.after + k, zones.end), (n + k, key0, query0 + k)


def _pad_schemes(tokenizer: Tokenizer, base: _Base) -> Iterator[list[str]]:
    """Pad word lists to try: seeded single-token nouns, then dots only."""
    single = [w for w in base.nouns if len(tokenizer.encode(" " + w)) == 1]
    if single:
        yield single
    yield ["."]


def build_group(
    *, tokenizer: Tokenizer, layout: PromptLayout, settings: ProbeSettings, base_index: int
) -> ProbeGroup:
    """Every verified variant of base prompt ``base_index`` (deterministic given the seed).

    The key and length sweeps share one pad scheme (the first that every one of
    their variants verifies with); the window sweep picks its own, so asking for
    it never changes the other sweeps' probes.
    """
    base = _Base(settings, base_index, layout)
    shared = tuple(s for s in settings.sweeps if s != "window")
    parts = [shared] if shared else []
    if "window" in settings.sweeps:
        parts.append(("window",))
    built: dict[str, list[Probe]] = {}
    fits: dict[tuple[str, ...], tuple[_Fit, int]] = {}  # per pad scheme: (fit, n_sentences)
    for sweeps in parts:
        built.update(_with_pad_scheme(tokenizer, base, settings, base_index, sweeps, fits))
    probes = tuple(p for sweep in settings.sweeps for p in built[sweep])
    return ProbeGroup(base_index=base_index, probes=probes)


def _with_pad_scheme(
    tokenizer: Tokenizer,
    base: _Base,
    settings: ProbeSettings,
    base_index: int,
    sweeps: tuple[str, ...],
    fits: dict[tuple[str, ...], tuple[_Fit, int]],
) -> dict[str, list[Probe]]:
    """The probes of ``sweeps`` with the first pad scheme all of them verify with.

    ``fits`` caches the key-sweep fit per pad scheme, with the sentence count
    ``_fit`` set on ``base`` (fitting re-tokenizes the base prompt several
    times), so the window part does not fit it again.
    """
    problems: list[str] = []
    for words in _pad_schemes(tokenizer, base):
        base.pad_words = words
        try:
            key = tuple(words)
            if key not in fits:
                fits[key] = (_fit(tokenizer, base, settings), base.n_sentences)
            fitted, base.n_sentences = fits[key]
            return {
                s: _build_sweep(tokenizer, base, settings, base_index, s, fitted) for s in sweeps
            }
        except _Mismatch as exc:
            problems.append(str(exc))
    raise CalibrationError(
        f"tokenizer {tokenizer.spec!r} does not count the probe pads exactly for base prompt "
        f"{base_index} ({'; '.join(problems)}); try another --context-tokens or --tokenizer"
    )


def _build_sweep(
    tokenizer: Tokenizer,
    base: _Base,
    settings: ProbeSettings,
    base_index: int,
    sweep: str,
    fitted: _Fit,
) -> list[Probe]:
    """The verified probes of one sweep (``_Mismatch`` if any variant does not verify)."""
    probes = []
    for k, variant, want in _variants(tokenizer, base, settings, sweep, fitted, base_index):
        rendered, length, key, query = _measure(tokenizer, base, variant)
        if (length, key, query) != want:
            raise _Mismatch(
                f"{sweep} offset {k}: (length, key, query) = {(length, key, query)}, "
                f"expected {want}"
            )
        probes.append(
            Probe(
                probe_id=f"{sweep}:{base_index}:{k}",
                sweep=sweep,
                base_index=base_index,
                offset=k,
                text=rendered.text,
                messages=rendered.messages,
                prompt_tokens=length,
                key_position=key,
                query_position=query,
                answer=base.answer,
                target_name=base.name,
            )
        )
    return probes


def iter_groups(
    *, tokenizer: Tokenizer, layout: PromptLayout, settings: ProbeSettings
) -> Iterator[ProbeGroup]:
    """Groups for base prompts ``0..base_prompts-1``, built lazily in order."""
    for b in range(settings.base_prompts):
        yield build_group(tokenizer=tokenizer, layout=layout, settings=settings, base_index=b)
