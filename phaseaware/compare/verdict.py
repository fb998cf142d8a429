"""``compare``'s verdict, from the run's own paired tests.

``calibrate`` and ``score`` judge phase sensitivity from accuracy by residue
(:mod:`phaseaware.calibration.verdict`). ``compare`` has something better: every
question answered under several arrangements, so each claim is a paired test
(:func:`~phaseaware.calibration.stats.paired.paired_mcnemar`) between two
arrangements that differ in one thing only:

* the gain: phase-aware against naive (retrieval order, no padding);
* the order: order-only (phase-aware's order, no padding or repeat) against naive;
* phase placement: phase-aware against the placebo (the same padding, aimed by the
  profile turned half a period, so at the residues the profile calls worst).

Each effect is ``better``/``worse`` when its exact McNemar p-value is below ``alpha``
(the side with more wins), else ``none``; every word of the verdict is read off
those figures, so it cannot disagree with the tests printed beside it. "Phase
placement helped" is said only when phase-aware beat the placebo at ``alpha``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from phaseaware.calibration.stats.paired import PairedOutcomes
from phaseaware.errors import InputError

__all__ = ["CompareVerdict", "Effect", "compare_verdict", "format_p_value", "paired_effect"]

Effect = Literal["better", "worse", "none"]


def format_p_value(p: float, alpha: float) -> str:
    """``p = 0.012`` or ``p < 0.001``, never rounded across ``alpha``: the printed figure
    is on the same side of the test's level as the p-value itself."""
    if p < 0.001 <= alpha:
        return "p < 0.001"
    for digits in range(2, 8):
        text = f"{p:.{digits}g}"
        if (float(text) < alpha) == (p < alpha):
            return f"p = {text}"
    return f"p = {p!r}"


def paired_effect(outcome: PairedOutcomes | None, alpha: float) -> Effect | None:
    """``better``/``worse``: the first arrangement right significantly more/less often at
    ``alpha``; ``none``: no significant difference; ``None``: not measured."""
    if outcome is None:
        return None
    if outcome.better(alpha):
        return "better"
    if outcome.worse(alpha):
        return "worse"
    return "none"


@dataclass(frozen=True)
class CompareVerdict:
    """What a comparison shows, from its paired tests at ``alpha``: ``gain`` (phase-aware
    vs naive), ``order`` (order-only vs naive), ``placement`` (phase-aware vs placebo);
    each ``None`` when its two arrangements were not both run. ``carried_by``:
    ``placement``, ``order``, ``both``, ``neither`` or ``not measured``."""

    alpha: float
    gain: PairedOutcomes | None
    order: PairedOutcomes | None
    placement: PairedOutcomes | None

    @property
    def placement_helped(self) -> bool:
        """Phase-aware beat the placebo at ``alpha``: the only ground for "phase placement
        helped"."""
        return paired_effect(self.placement, self.alpha) == "better"

    @property
    def carried_by(self) -> str:
        order = paired_effect(self.order, self.alpha)
        placement = paired_effect(self.placement, self.alpha)
        if order is None and placement is None:
            return "not measured"
        if placement == "better":
            return "both" if order == "better" else "placement"
        return "order" if order == "better" else "neither"

    def to_dict(self) -> dict[str, object]:
        """JSON-safe: the three tests (or ``None``), their effects, ``carried_by``, the lines."""

        def test(outcome: PairedOutcomes | None) -> dict[str, object] | None:
            if outcome is None:
                return None
            return {**asdict(outcome), "difference": outcome.difference,
                    "effect": paired_effect(outcome, self.alpha)}  # fmt: skip

        return {
            "alpha": self.alpha,
            "gain": test(self.gain),
            "order": test(self.order),
            "placement": test(self.placement),
            "placement_helped": self.placement_helped,
            "carried_by": self.carried_by,
            "lines": self.lines(),
        }

    def _figures(self, outcome: PairedOutcomes) -> str:
        return (
            f"{100 * outcome.difference:+.1f} points (wins {outcome.wins}, losses "
            f"{outcome.losses}, exact McNemar {format_p_value(outcome.p_value, self.alpha)})"
        )

    def lines(self) -> list[str]:
        """The verdict as text: the gain first, then order and placement, then which carried."""
        a = f"alpha {self.alpha:g}"
        gain = paired_effect(self.gain, self.alpha)
        if self.gain is None:
            head = "verdict: the gain needs both naive and phase-aware (see --arrangements)"
        elif gain == "better":
            head = f"verdict: phase-aware beat naive at {a}: {self._figures(self.gain)}"
        elif gain == "worse":
            head = f"verdict: phase-aware did worse than naive at {a}: {self._figures(self.gain)}"
        else:
            head = (
                f"verdict: no significant difference between phase-aware and naive at {a}: "
                f"{self._figures(self.gain)}"
            )
        return [head, self._order_line(), self._placement_line(), self._attribution_line()]

    def _order_line(self) -> str:
        if self.order is None:
            return "  order (order-only vs naive): not measured (run order-only and naive)"
        words = {
            "better": "the order helped",
            "worse": "the order hurt",
            "none": "no significant order effect",
        }[paired_effect(self.order, self.alpha) or "none"]
        return f"  order (order-only vs naive): {self._figures(self.order)}: {words}"

    def _placement_line(self) -> str:
        if self.placement is None:
            return (
                "  placement (phase-aware vs placebo): not measured (run phase-aware and placebo)"
            )
        words = {
            "better": "phase placement helped",
            "worse": "the placebo did better: the profile's good residues are not this "
            "model's; recalibrate on the model, tokenizer and chat format you serve",
            "none": "no significant placement effect",
        }[paired_effect(self.placement, self.alpha) or "none"]
        return f"  placement (phase-aware vs placebo): {self._figures(self.placement)}: {words}"

    def _attribution_line(self) -> str:
        """Which of order and placement carried the result; every claim read off the two
        tests' effects (a hurt is said too, an unmeasured side is named)."""
        a = f"alpha {self.alpha:g}"
        effects = {
            "the order": paired_effect(self.order, self.alpha),
            "phase placement": paired_effect(self.placement, self.alpha),
        }
        measured = {name: e for name, e in effects.items() if e is not None}
        missing = [name.removeprefix("the ").removeprefix("phase ") for name in effects
                   if name not in measured]  # fmt: skip
        hurt = [name for name, e in measured.items() if e == "worse"]
        helped = [name for name, e in measured.items() if e == "better"]
        if not measured:
            return (
                "  attribution: not measured: run the controls order-only and placebo "
                "(the default --arrangements)"
            )
        if len(helped) == 2:
            words = "both the order and phase placement carried the result"
        elif helped:
            other = next(name for name in effects if name != helped[0])
            words = f"{helped[0]} carried the result, not {other}"
        elif len(measured) == 1:
            name, effect = next(iter(measured.items()))
            words = f"{name} {'hurt' if effect == 'worse' else 'had no significant effect'} at {a}"
            hurt = []
        elif hurt:
            words = f"no gain from the order or from phase placement at {a}"
        elif paired_effect(self.gain, self.alpha) == "better":
            words = (
                f"neither the order alone nor phase placement alone is significant at {a}: "
                "the gain over naive is not attributed"
            )
        else:
            words = f"neither the order nor phase placement had a significant effect at {a}"
        if hurt:
            words += "".join(f"; {name} hurt" for name in hurt)
        if missing:
            words += f" ({missing[0]} not measured)"
        return f"  attribution: {words}"

    def text(self) -> str:
        return "\n".join(self.lines())


def compare_verdict(
    *,
    gain: PairedOutcomes | None,
    order: PairedOutcomes | None,
    placement: PairedOutcomes | None,
    alpha: float = 0.05,
) -> CompareVerdict:
    """The comparison's verdict from its paired tests (see :class:`CompareVerdict`)."""
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be a fraction in (0, 1), got {alpha}")
    return CompareVerdict(alpha=alpha, gain=gain, order=order, placement=placement)
