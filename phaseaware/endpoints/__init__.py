"""Endpoints: how a serving stack's token positions relate to phaseaware's rendering.

Discovery (``probe_endpoint``), the record it writes (``EndpointRecord``,
``phaseaware.endpoints.record``), verification after every call (``check_prompt_tokens``, ``check_prompt_ids``, ``check_response``)
and the token-exact completions path (``complete_tokens``).
"""

from __future__ import annotations

from phaseaware.endpoints.adapt import EndpointRef, endpoint_options, load_endpoint, usage_offsets
from phaseaware.endpoints.complete import complete_tokens, prompt_token_ids
from phaseaware.endpoints.probe import (
    TemplateMismatchError,
    TokenizeUnavailable,
    compare_tokens,
    make_client,
    probe_endpoint,
    probe_prompts,
)
from phaseaware.endpoints.record import (
    EndpointRecord,
    apply_endpoint,
    endpoint_dir,
    find_endpoint_record,
    load_endpoint_record,
    record_path,
    redact_url,
    resolve_endpoint,
    save_endpoint_record,
)
from phaseaware.endpoints.request_settings import chat_template_kwargs
from phaseaware.endpoints.usage import (
    ON_MISMATCH,
    PROMPT_IDS_FIELDS,
    PROMPT_IDS_NOT_STREAMED,
    UsageCheck,
    check_identity,
    check_prompt_ids,
    check_prompt_tokens,
    check_response,
    reported_prompt_ids,
    reported_prompt_tokens,
)

__all__ = [
    "ON_MISMATCH",
    "PROMPT_IDS_FIELDS",
    "PROMPT_IDS_NOT_STREAMED",
    "EndpointRecord",
    "EndpointRef",
    "TemplateMismatchError",
    "TokenizeUnavailable",
    "UsageCheck",
    "apply_endpoint",
    "chat_template_kwargs",
    "check_identity",
    "check_prompt_ids",
    "check_prompt_tokens",
    "check_response",
    "compare_tokens",
    "complete_tokens",
    "endpoint_dir",
    "endpoint_options",
    "find_endpoint_record",
    "load_endpoint",
    "load_endpoint_record",
    "make_client",
    "probe_endpoint",
    "probe_prompts",
    "prompt_token_ids",
    "record_path",
    "redact_url",
    "reported_prompt_ids",
    "reported_prompt_tokens",
    "resolve_endpoint",
    "save_endpoint_record",
    "usage_offsets",
]
