"""One ``phaseaware score`` run: read a log, place every sample, tally by residue.

:func:`score_log` is the library entry point; :mod:`phaseaware.scoring.report`
turns its result into JSON, text, a chart or a profile.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from phaseaware.scoring.errors import EvalLogError
from phaseaware.scoring.formats import FORMATS, ReadOptions
from phaseaware.scoring.locate import Located, Locator, locate
from phaseaware.scoring.sample import EvalSample, Skip
from phaseaware.scoring.tally import Tally, tally

__all__ = ["KEPT_SKIPS", "ScoreResult", "score_log", "score_samples"]


#: Skips kept whole for the report (their ids and details); the rest are only counted.
KEPT_SKIPS = 50


@dataclass(frozen=True)
class ScoreResult:
    """The tally of the placed samples, the skips by reason, and where they came from.

    ``skipped`` holds the first :data:`KEPT_SKIPS` skips (id, reason, detail);
    ``skip_counts`` counts every skip by reason (most frequent first) and ``n_skipped``
    is their total: a log of a million bad lines costs a counter, not a million objects.
    """

    source: Path
    format: str
    tokenizer_spec: str
    tokenizer_fingerprint: str
    located: tuple[Located, ...]
    skipped: tuple[Skip, ...]
    tally: Tally
    skip_counts: tuple[tuple[str, int], ...] = ()
    n_skipped: int = 0


def score_samples(
    samples: Iterable[EvalSample | Skip],
    *,
    locator: Locator,
    source: Path,
    format: str,
    period: int | None,
    max_period: int = 16,
    length_buckets: int = 4,
) -> ScoreResult:
    """Place each sample (skips pass through) and tally the placed ones."""
    located: list[Located] = []
    kept: list[Skip] = []
    reasons: Counter[str] = Counter()
    for sample in samples:
        found = sample if isinstance(sample, Skip) else locate(sample, locator)
        if isinstance(found, Skip):
            reasons[found.reason] += 1
            if len(kept) < KEPT_SKIPS:
                kept.append(found)
        else:
            located.append(found)
    if not located:
        summary = ", ".join(f"{k} {v}" for k, v in reasons.most_common()) or "the log is empty"
        raise EvalLogError(
            f"no sample could be placed in its prompt (skipped: {summary}); check --format, "
            "--needle-field, --tokenizer and --chat-format (or --server)"
        )
    result = tally(located, period=period, max_period=max_period, length_buckets=length_buckets)
    return ScoreResult(
        source=source,
        format=format,
        tokenizer_spec=locator.tokenizer.spec,
        tokenizer_fingerprint=locator.tokenizer.fingerprint(),
        located=tuple(located),
        skipped=tuple(kept),
        tally=result,
        skip_counts=tuple(reasons.most_common()),
        n_skipped=sum(reasons.values()),
    )


def score_log(
    path: str | Path,
    *,
    format: str,
    locator: Locator,
    options: ReadOptions | None = None,
    period: int | None = 8,
    max_period: int = 16,
    length_buckets: int = 4,
) -> ScoreResult:
    """Accuracy by key residue of the eval log at ``path`` in ``format`` (see :data:`FORMATS`)."""
    reader = FORMATS.get(format)
    if reader is None:
        raise EvalLogError(f"unknown --format {format!r}; use one of {', '.join(FORMATS)}")
    source = Path(path)
    return score_samples(
        reader(source, options or ReadOptions()),
        locator=locator,
        source=source,
        format=format,
        period=period,
        max_period=max_period,
        length_buckets=length_buckets,
    )
