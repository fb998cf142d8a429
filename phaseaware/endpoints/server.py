"""Which server software answers at a base URL, from what it publishes about itself.

``probe-endpoint`` records it (``EndpointRecord.server``) beside the template the
probes were rendered with (``chat_template_sha256``), so a record says what rendered
the prompt, not only how many tokens it had. Recognised today:

- **llama-cpp-python** (``python -m llama_cpp.server``): its app publishes
  ``GET /openapi.json`` titled ``"🦙 llama.cpp Python API"`` with the package
  version. It renders the GGUF's own Jinja template (``tokenizer.chat_template``;
  the ``hf`` format with an ``hf:<file.gguf>`` tokenizer reads the same one), has no
  chat ``/tokenize`` (its ``/extras/tokenize`` takes text), so the probe counts
  (``mode: count``), and it ignores a request's ``chat_template_kwargs`` (its
  ``--chat_template_kwargs`` option sets them for the whole server).

Anything else is ``None`` (unknown, not an error: the probe measures it the same way).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING

from phaseaware.endpoints.record import EndpointRecord
from phaseaware.tokenizers.base import ChatTemplateTokenizer, Tokenizer

if TYPE_CHECKING:  # pragma: no cover
    import openai

__all__ = ["LLAMA_CPP_PYTHON_TITLE", "identify_server", "template_sha256", "with_server"]

LLAMA_CPP_PYTHON_TITLE = "llama.cpp Python API"


def identify_server(client: openai.OpenAI, base: str) -> str | None:
    """``"llama-cpp-python <version>"`` for a llama-cpp-python server at ``base`` (the
    ``/v1`` base URL or its root), else ``None``; one ``GET``, never an error."""
    import openai

    root = base[: -len("/v1")] if base.endswith("/v1") else base
    try:
        doc = client.with_options(max_retries=0, timeout=10.0).get(
            root + "/openapi.json", cast_to=object
        )
    except openai.APIError:
        return None
    info = doc.get("info") if isinstance(doc, dict) else None
    title = info.get("title") if isinstance(info, dict) else None
    if isinstance(title, str) and LLAMA_CPP_PYTHON_TITLE in title:
        version = info.get("version") if isinstance(info, dict) else None
        return f"llama-cpp-python {version}" if isinstance(version, str) else "llama-cpp-python"
    return None


def template_sha256(template: str | None) -> str | None:
    """The sha256 (hex) of a Jinja chat template's source, ``None`` without one."""
    return hashlib.sha256(template.encode("utf-8")).hexdigest() if template else None


def with_server(
    record: EndpointRecord, *, client: openai.OpenAI, base: str, tokenizer: Tokenizer
) -> EndpointRecord:
    """``record`` with the server software (one more request) and, for the ``hf`` format,
    the sha256 of the tokenizer's template the probes were rendered with."""
    template = tokenizer.chat_template if isinstance(tokenizer, ChatTemplateTokenizer) else None
    return dataclasses.replace(
        record,
        probes=record.probes + 1,
        server=identify_server(client, base),
        chat_template_sha256=template_sha256(template) if record.chat_format == "hf" else None,
    )
