"""The scalar reliability model, written out plainly: the oracle of ``Profile``'s fast forms.

As tiktoken keeps ``_educational.py`` beside its fast path, the obviously-correct
definitions live here, in tests only; the package keeps one vectorised method
(``Profile.position_reliabilities``) and the planner's O(1) lookup
(``Profile.key_reliability_lookup``), both checked against these.
"""

from __future__ import annotations

from phaseaware.profiles.model import Profile


def key_reliability(profile: Profile, position: int, *, distance_to_end: int) -> float:
    """A key at absolute ``position`` with ``distance_to_end`` tokens to the end (1 for
    the last token): raw inside the local window, else its residue's reliability."""
    if profile.local_window is not None and distance_to_end <= profile.local_window:
        return profile.window_reliability()
    return profile.residue_reliability(position)


def position_reliability(profile: Profile, position: int, *, prompt_length: int) -> float:
    """Expected accuracy of a key at absolute ``position`` of a ``prompt_length`` prompt."""
    if not 0 <= position < prompt_length:
        raise ValueError(f"position {position} outside prompt of {prompt_length} tokens")
    base = key_reliability(profile, position, distance_to_end=prompt_length - position)
    return base * profile.length_factor(prompt_length)
