"""Needle-in-a-haystack probes with token-exact key positions and prompt lengths.

A *base prompt* is a haystack of seeded filler sentences holding key-value
records (one target, distractors with distinct names and numbers) followed by
the question, rendered through a layout (BOS/template included). Its length is
exactly ``context_tokens`` tokens of the run's tokenizer and its target key
token (the first token of the target's name) sits at an absolute position
``≡ 0 (mod n_offsets)`` (``≡ base_index (mod n_offsets)`` with ``spread_keys``, the
``--period auto`` runs: see :class:`ProbeSettings`). Around the target record sit two *pad zones* of filler
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
from dataclasses import dataclass

from phaseaware.calibration import task
from phaseaware.calibration.backends.base import ProbeRequest
from phaseaware.calibration.haystack import (
    BasePrompt,
    Fit,
    PadMismatch,
    fit_base,
    measure,
    pad_schemes,
    variants,
)
from phaseaware.calibration.probe_settings import DEFAULT_SWEEPS, SWEEPS, ProbeSettings
from phaseaware.chat.layout import PromptLayout
from phaseaware.errors import CalibrationError
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


def build_group(
    *, tokenizer: Tokenizer, layout: PromptLayout, settings: ProbeSettings, base_index: int
) -> ProbeGroup:
    """Every verified variant of base prompt ``base_index`` (deterministic given the seed).

    The key and length sweeps share one pad scheme (the first that every one of
    their variants verifies with); the window sweep picks its own, so asking for
    it never changes the other sweeps' probes.
    """
    base = BasePrompt(settings, base_index, layout)
    shared = tuple(s for s in settings.sweeps if s != "window")
    parts = [shared] if shared else []
    if "window" in settings.sweeps:
        parts.append(("window",))
    built: dict[str, list[Probe]] = {}
    fits: dict[tuple[str, ...], tuple[Fit, int]] = {}  # per pad scheme: (fit, n_sentences)
    for sweeps in parts:
        built.update(_with_pad_scheme(tokenizer, base, settings, base_index, sweeps, fits))
    probes = tuple(p for sweep in settings.sweeps for p in built[sweep])
    return ProbeGroup(base_index=base_index, probes=probes)


def _with_pad_scheme(
    tokenizer: Tokenizer,
    base: BasePrompt,
    settings: ProbeSettings,
    base_index: int,
    sweeps: tuple[str, ...],
    fits: dict[tuple[str, ...], tuple[Fit, int]],
) -> dict[str, list[Probe]]:
    """The probes of ``sweeps`` with the first pad scheme all of them verify with.

    ``fits`` caches the key-sweep fit per pad scheme, with the sentence count
    ``fit_base`` set on ``base`` (fitting re-tokenizes the base prompt several
    times), so the window part does not fit it again.
    """
    problems: list[str] = []
    for words in pad_schemes(tokenizer, base):
        base.pad_words = words
        try:
            key = tuple(words)
            if key not in fits:
                fits[key] = (fit_base(tokenizer, base, settings), base.n_sentences)
            fitted, base.n_sentences = fits[key]
            return {
                s: _build_sweep(tokenizer, base, settings, base_index, s, fitted) for s in sweeps
            }
        except PadMismatch as exc:
            problems.append(str(exc))
    raise CalibrationError(
        f"tokenizer {tokenizer.spec!r} does not count the probe pads exactly for base prompt "
        f"{base_index} ({'; '.join(problems)}); try another --context-tokens or --tokenizer"
    )


def _build_sweep(
    tokenizer: Tokenizer,
    base: BasePrompt,
    settings: ProbeSettings,
    base_index: int,
    sweep: str,
    fitted: Fit,
) -> list[Probe]:
    """The verified probes of one sweep (``PadMismatch`` if any variant does not verify)."""
    probes = []
    for k, variant, want in variants(tokenizer, base, settings, sweep, fitted, base_index):
        rendered, length, key, query = measure(tokenizer, base, variant)
        if (length, key, query) != want:
            raise PadMismatch(
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
