"""Was the profile measured on what this comparison runs? One warning per difference.

A profile holds one model's residues, counted with one tokenizer, under one chat
format. ``compare`` with a profile of another model, tokenizer or chat format
still runs (a user may compare on purpose), but its phase-aware arrangement then
aims at residues measured elsewhere, so the report says so first.

* model: the profile's ``model`` against the run's, by their normalised names (a
  hosted alias that resolves to the profile's checkpoint is the same model);
* tokenizer: a recorded fingerprint that differs is refused by assembly already
  (``FingerprintMismatchError``); a profile without one (published) is compared
  by its tokenizer spec;
* chat format: calibrate writes it into the profile's protocol text (``chat format
  'hf'``; ``template 'hf'`` before the rename); a profile that does not say (a
  published or ``score`` profile) is not compared.
"""

from __future__ import annotations

import re

from phaseaware.profiles.aliases import resolve_alias
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import normalize_model_name
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["profile_chat_format", "profile_mismatches"]

_CHAT_FORMAT = re.compile(r"\b(?:chat format|template) '([^']+)'")


def profile_chat_format(profile: Profile) -> str | None:
    """The chat format ``profile`` was measured under, when its protocol text says."""
    found = _CHAT_FORMAT.search(profile.provenance.protocol)
    return found.group(1) if found else None


def _same_model(profile_model: str, run_model: str) -> bool:
    mine, theirs = normalize_model_name(profile_model), normalize_model_name(run_model)
    alias = resolve_alias(theirs)
    return mine == theirs or (alias is not None and alias.checkpoint == mine)


def profile_mismatches(
    profile: Profile, *, model: str, tokenizer: Tokenizer, chat_format: str
) -> tuple[str, ...]:
    """One line per way ``profile`` was measured on something other than this run."""
    found = []
    fix = "calibrate this model as you serve it (`phaseaware calibrate`) and pass that profile"
    if not _same_model(profile.model, model):
        found.append(
            f"the profile was measured for model {profile.model!r}, this run asks {model!r}: "
            f"its residues may not be this model's; {fix}"
        )
    ref = profile.tokenizer
    if ref.fingerprint is None and ref.spec is not None and ref.spec != tokenizer.spec:
        found.append(
            f"the profile names tokenizer {ref.spec!r}, this run counts with {tokenizer.spec!r}: "
            f"positions counted with another vocabulary land elsewhere; {fix}"
        )
    measured = profile_chat_format(profile)
    if measured is not None and measured != chat_format:
        found.append(
            f"the profile was measured under chat format {measured!r}, this run renders "
            f"{chat_format!r}: the template moves every position; {fix}"
        )
    return tuple(found)
