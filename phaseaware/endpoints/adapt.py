"""Endpoint records in the framework adapters: one resolution, one usage-check rule.

Both adapters (LangChain, LlamaIndex) take ``endpoint=`` (an :class:`EndpointRecord`,
a record path, or ``{"base_url", "model"}``) and call :func:`endpoint_options` before
assembly and :func:`usage_offsets` after each call, so the two cannot disagree on
what a record means.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.endpoints.record import EndpointRecord, apply_endpoint, resolve_endpoint
from phaseaware.errors import InputError
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["EndpointRef", "endpoint_options", "load_endpoint", "usage_offsets"]

EndpointRef = EndpointRecord | str | os.PathLike[str] | Mapping[str, Any] | None


def load_endpoint(endpoint: EndpointRef, *, source: str = "endpoint") -> EndpointRecord | None:
    """The record ``endpoint`` names: itself, a record file (``str`` or path), or
    ``{"base_url", "model"}`` (the stored record); ``None`` for ``None``."""
    if endpoint is None or isinstance(endpoint, EndpointRecord):
        return endpoint
    if isinstance(endpoint, os.PathLike):
        return resolve_endpoint(os.fspath(endpoint), source=source)
    return resolve_endpoint(endpoint, source=source)


def _offset_text(offsets: tuple[int, ...]) -> str:
    return f"offset {offsets[0]}" if len(offsets) == 1 else f"offsets {list(offsets)}"


def endpoint_options(
    options: AssemblyOptions,
    record: EndpointRecord | None,
    tokenizer: Tokenizer,
) -> AssemblyOptions:
    """``options`` with ``record``'s offset (constant) or offset set (varying).

    ``FingerprintMismatchError`` for a record probed with another tokenizer. An
    offset already in ``options`` (``position_offset``/``offsets``) that agrees
    with the record is accepted; one that disagrees is an ``InputError`` naming both.
    """
    if record is None:
        return options
    record.check_tokenizer(tokenizer)
    if options.position_offset or options.offsets:
        have = options.offsets if options.offsets else (options.position_offset,)
        want = record.offsets if record.stability == "varying" else (record.offset,)
        if tuple(have) != tuple(want):
            raise InputError(
                f"position_offset/offsets say {_offset_text(tuple(have))}, but the endpoint "
                f"record for {record.model!r} at {record.base_url} says "
                f"{_offset_text(tuple(want))} ({record.stability}); pass only the endpoint "
                "record, or rerun `phaseaware probe-endpoint` if the server changed"
            )
        options = dataclasses.replace(options, position_offset=0, offsets=None)
    return apply_endpoint(options, record, tokenizer)


def usage_offsets(options: AssemblyOptions) -> tuple[int, tuple[int, ...] | None]:
    """``(offset, offsets)`` for ``check_prompt_tokens`` after a call planned with ``options``.

    After :func:`endpoint_options` these are the record's: ``offset=record.offset`` and,
    for a varying record, ``offsets=record.offsets`` (any of them is no drift).
    """
    if options.offsets:
        return options.offsets[0], options.offsets
    return options.position_offset, None
