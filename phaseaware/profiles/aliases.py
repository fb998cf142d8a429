"""Hosted API model names are aliases: profiles belong to the checkpoint they serve.

A provider's API name (``deepseek-v4-flash``) can move to a new checkpoint, and a
profile chosen by the API name is then silently another model's (DeepSeek-V4.1-Flash
has period 2, not V4-Flash's 4). :data:`HOSTED_ALIASES` maps known names to the
checkpoint profile they resolve to, with the date of the mapping and its source;
:func:`resolve_alias` answers for one name. The registry looks a name up through it
and says which checkpoint an alias resolved to (a ``PhaseawareWarning``, shown on
stderr), never silently.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HOSTED_ALIASES", "HostedAlias", "resolve_alias"]


@dataclass(frozen=True)
class HostedAlias:
    """One hosted API name and the checkpoint it serves since ``since`` (ISO date)."""

    alias: str
    checkpoint: str  # a registered profile name
    since: str
    source: str

    def describe(self) -> str:
        return (
            f"hosted model name {self.alias!r} resolved to checkpoint {self.checkpoint!r} "
            f"(served under that name since {self.since}; {self.source}); pass the "
            "checkpoint's profile name to choose another"
        )


# normalised alias -> mapping (latest mapping only; keys are normalize_model_name forms)
HOSTED_ALIASES: dict[str, HostedAlias] = {
    "deepseek-v4-flash": HostedAlias(
        alias="deepseek-v4-flash",
        checkpoint="deepseek-v4.1-flash",
        since="2026-09-10",
        source="DeepSeek API model list, as recorded by phaseaware on 2026-09-10",
    ),
}


def resolve_alias(normalized_name: str) -> HostedAlias | None:
    """The mapping of a normalised hosted model name, or None when it is not an alias."""
    return HOSTED_ALIASES.get(normalized_name)
