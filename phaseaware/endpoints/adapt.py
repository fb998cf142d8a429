"""Endpoint records in the framework adapters: one resolution, one usage-check rule.

Both adapters (LangChain, LlamaIndex) take ``endpoint=`` (an :class:`EndpointRecord`,
a record path, or ``{"base_url", "model"}``) and call :func:`endpoint_options` before
assembly and :func:`usage_offsets` after each call, so the two cannot disagree on
what a record means.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.endpoints.record import EndpointRecord, resolve_endpoint, with_endpoint
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


def endpoint_options(
    options: AssemblyOptions,
    record: EndpointRecord | None,
    tokenizer: Tokenizer,
) -> AssemblyOptions:
    """``with_endpoint(options, record, tokenizer)``, and ``options`` as they are without
    a record (the adapters' optional ``endpoint=``)."""
    return options if record is None else with_endpoint(options, record, tokenizer)


def usage_offsets(options: AssemblyOptions) -> tuple[int, tuple[int, ...] | None]:
    """``(offset, offsets)`` for ``check_prompt_tokens`` after a call planned with ``options``.

    After :func:`endpoint_options` these are the record's: ``offset=record.offset`` and,
    for a varying record, ``offsets=record.offsets`` (any of them is no drift).
    """
    if options.offsets:
        return options.offsets[0], options.offsets
    return options.position_offset, None
