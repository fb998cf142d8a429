"""The keyword family every adapter constructor takes, typed once (PEP 692 ``Unpack``).

An adapter writes ``def __init__(self, ..., **target: Unpack[TargetArgs])`` and calls
:func:`target_of` once; the names, defaults and meanings are those of
:class:`~phaseaware.AssemblyRequest` plus the endpoint record and ``state_settings`` of
:func:`~phaseaware.integrate.resolve_target`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Required, TypedDict

from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.assembly.inputs.request import (
    AssemblyRequest,
    OptionsRef,
    ProfileRef,
    SettingsRef,
)
from phaseaware.chat.formats import ChatFormat
from phaseaware.endpoints import EndpointRef
from phaseaware.integrate.target import Target, resolve_target
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["TargetArgs", "TargetOptions", "target_keywords", "target_of"]


class TargetOptions(TypedDict, total=False):
    """The optional part: ``options``, ``position_offset``, ``endpoint`` (a
    ``probe-endpoint`` record, path or ``{"base_url", "model"}``), ``thinking`` /
    ``settings`` (the chat settings planned with) and ``state_settings`` (``False``: the
    client states none, so the record's ``server_default`` is planned with)."""

    options: OptionsRef
    position_offset: int | None
    endpoint: EndpointRef
    thinking: bool
    settings: SettingsRef
    state_settings: bool


class TargetArgs(TargetOptions, total=False):
    """The whole family: ``tokenizer`` (a spec or ``Tokenizer``), ``chat_format`` (how the
    server renders messages), ``profile`` (a model name, profile path, ``Profile`` or
    ``None``) and ``budget_tokens`` (the whole prompt), plus :class:`TargetOptions`."""

    tokenizer: Required[str | Tokenizer]
    chat_format: Required[str | ChatFormat]
    profile: Required[ProfileRef]
    budget_tokens: Required[int]


def target_of(args: Mapping[str, Any], *, default_options: AssemblyOptions | None = None) -> Target:
    """Resolve an adapter's :class:`TargetArgs` (the request, the endpoint record and
    ``state_settings``) into one :class:`Target`."""
    fields = dict(args)
    endpoint = fields.pop("endpoint", None)
    state_settings = fields.pop("state_settings", True)
    return resolve_target(
        AssemblyRequest(**fields),
        endpoint=endpoint,
        state_settings=state_settings,
        default_options=default_options,
    )


def target_keywords(target: Target) -> str:
    """``target`` as the keywords of this family, resolved (``tokenizer=..., chat_format=...,
    profile=..., budget_tokens=...``): what an adapter's ``repr`` shows."""
    profile = target.profile
    return (
        f"tokenizer={target.tokenizer.spec!r}, chat_format={target.require_format().name!r}, "
        f"profile={profile.model if profile else None!r}, budget_tokens={target.budget_tokens}"
    )
