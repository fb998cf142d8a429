"""Process an OpenAI batch input file with a :class:`ServerEngine` (like ``vllm run-batch``).

A stand-in for offline batch runners in tests and demos: each input line
``{"custom_id", "method", "url", "body"}`` is validated and served exactly as
the HTTP server would (same request parsing, chat template, token counting,
response body), and one output line per input line is written::

    {"id": "batch-req-<n>", "custom_id": ..., "response": {"status_code": 200,
     "request_id": ..., "body": {...}}, "error": null}

Requests the server would refuse get their HTTP status and OpenAI error body.
``shuffle_seed`` writes the output lines in a seeded random order, as real
batch runners do not keep input order.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from phaseaware.atomic import atomic_write_text
from phaseaware.reference.engine import ServerEngine
from phaseaware.reference.openai_protocol import (
    RequestError,
    error_body,
    parse_chat_request,
    parse_completion_request,
)
from phaseaware.reference.openai_responses import completion_body

__all__ = ["run_batch"]

_PARSERS = {
    "/v1/chat/completions": parse_chat_request,
    "/v1/completions": parse_completion_request,
}


def _serve(engine: ServerEngine, item: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    url, body = item.get("url"), item.get("body")
    parse = _PARSERS.get(str(url))
    if parse is None:
        return 404, error_body(404, f"Unknown URL: {url}", type_="invalid_request_error")
    if not isinstance(body, dict):
        return 400, error_body(400, "body must be a JSON object", type_="invalid_request_error")
    try:
        params = parse(body, model_name=engine.model_name)
    except RequestError as exc:
        return exc.status, exc.to_body()
    prompt = params.prompt if params.messages is None else engine.render_chat(params.messages)
    prompt_tokens = int(engine.count_tokens(prompt))
    result = engine.generate(
        prompt, max_tokens=params.max_tokens, temperature=params.temperature, stop=params.stop
    )
    return 200, dict(completion_body(params, result, prompt_tokens, created=0))


def run_batch(
    engine: ServerEngine,
    input_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    *,
    shuffle_seed: int | None = None,
) -> int:
    """Serve every request line of ``input_path``; write the results to ``output_path``.

    Returns the number of output lines (one per non-blank input line). A line
    that is not JSON gets an output line with ``custom_id: null`` and an error.
    """
    lines = Path(input_path).read_text(encoding="utf-8").splitlines()
    out: list[str] = []
    for n, raw in enumerate(line for line in lines if line.strip()):
        try:
            item = json.loads(raw)
        except ValueError:
            item = None
        if not isinstance(item, dict):
            doc = {"id": f"batch-req-{n}", "custom_id": None, "response": None}
            doc["error"] = {"message": "input line is not a JSON object"}
            out.append(json.dumps(doc))
            continue
        status, body = _serve(engine, item)
        response = {"status_code": status, "request_id": f"req-{n}", "body": body}
        doc = {"id": f"batch-req-{n}", "custom_id": item.get("custom_id"), "response": response}
        doc["error"] = None
        out.append(json.dumps(doc, ensure_ascii=False))
    if shuffle_seed is not None:
        order = np.random.default_rng(shuffle_seed).permutation(len(out))
        out = [out[i] for i in order]
    atomic_write_text(output_path, "".join(line + "\n" for line in out))
    return len(out)
