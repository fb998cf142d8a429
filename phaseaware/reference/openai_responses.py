"""The OpenAI wire protocol's answers: ``/v1/models``, completion bodies and stream chunks.

:func:`stream_chunks` turns a finished completion into the OpenAI streaming chunks
(``chat.completion.chunk`` / ``text_completion``) that the server sends as server-sent
events: a role chunk (chat), the text in pieces, a chunk with ``finish_reason`` and, when
``stream_options.include_usage`` is set, a last chunk with no choices and the ``usage``.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Mapping
from typing import Any

from phaseaware.reference.engine import GenerationResult
from phaseaware.reference.openai_protocol import CompletionParams

__all__ = ["completion_body", "models_body", "stream_chunks"]


def models_body(model_name: str, created: int) -> dict[str, Any]:
    """The ``GET /v1/models`` list for one model."""
    entry = {"id": model_name, "object": "model", "created": created, "owned_by": "phaseaware"}
    return {"object": "list", "data": [entry]}


_ids = itertools.count(1)


def _usage(prompt_tokens: int, result: GenerationResult) -> dict[str, int]:
    completion_tokens = int(result.completion_tokens)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


_PIECES = re.compile(r"\s*\S+|\s+")


def stream_chunks(
    params: CompletionParams, result: GenerationResult, prompt_tokens: int, created: int
) -> list[dict[str, Any]]:
    """The streaming chunks of one finished completion, in order (without ``[DONE]``).

    The text goes out word by word (each piece a run of whitespace and the word after it);
    the pieces join to exactly ``result.text``."""
    serial = next(_ids)
    chat = params.messages is not None
    kind, prefix = ("chat.completion.chunk", "chatcmpl") if chat else ("text_completion", "cmpl")
    base = {"id": f"{prefix}-{created}-{serial}", "object": kind, "created": int(time.time())}
    base["model"] = params.model

    def chunk(delta: dict[str, Any] | str, finish: str | None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0}
        if chat:
            choice["delta"] = delta
        else:
            choice["text"] = delta
        choice["logprobs"] = None
        choice["finish_reason"] = finish
        out = {**base, "choices": [choice]}
        if params.include_usage:
            out["usage"] = None
        return out

    pieces = _PIECES.findall(result.text)
    if chat:
        chunks = [chunk({"role": "assistant", "content": ""}, None)]
        chunks += [chunk({"content": piece}, None) for piece in pieces]
        chunks.append(chunk({}, result.finish_reason))
    else:
        chunks = [chunk(piece, None) for piece in pieces] + [chunk("", result.finish_reason)]
    if params.include_usage:
        chunks.append({**base, "choices": [], "usage": _usage(prompt_tokens, result)})
    return chunks


def completion_body(
    params: CompletionParams, result: GenerationResult, prompt_tokens: int, created: int
) -> Mapping[str, Any]:
    serial = next(_ids)
    choice: dict[str, Any] = {"index": 0, "finish_reason": result.finish_reason}
    if params.messages is not None:
        choice["message"] = {"role": "assistant", "content": result.text}
        kind, prefix = "chat.completion", "chatcmpl"
    else:
        choice["text"] = result.text
        kind, prefix = "text_completion", "cmpl"
    choice["logprobs"] = dict(result.logprobs) if result.logprobs is not None else None
    return {
        "id": f"{prefix}-{created}-{serial}",
        "object": kind,
        "created": int(time.time()),
        "model": params.model,
        "choices": [choice],
        "usage": _usage(prompt_tokens, result),
    }
