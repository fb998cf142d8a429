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
- **llama.cpp's llama-server** (C++): ``GET /props`` answers with its ``build_info``
  and the chat template it renders (``chat_template``: the GGUF's own, or
  ``--chat-template-file``). Exact mode reads its ids through ``/apply-template`` and
  ``/tokenize`` (:mod:`phaseaware.endpoints.tokenize`). When the server's template is
  not the one phaseaware rendered with, the probe warns: the record's sha256 would name
  a template the server does not use.

- **SGLang** (``sglang.launch_server``): ``GET /server_info`` (``/get_server_info``
  before 0.5.x, still served) answers with its ``version`` beside the launch settings
  (``model_path``, ``tp_size``, ...). SGLang 0.5.23 renders DeepSeek-V4/V4.1 through
  DeepSeek's reference encoder (``deepseek-recipe``), so its identity carries the
  renderer ``"sglang"`` (:mod:`phaseaware.chat.deepseek_recipe`); the probe renders
  with it before it sends a probe, and plans made with the record use it.

- **vLLM**: ``GET /version`` answers ``{"version": ...}`` and nothing else
  (``vllm/entrypoints/serve/instrumentator/basic.py``). It renders DeepSeek formats with
  the checkpoint's encoder file (the default renderer).

The name's first word (``vllm``, ``sglang``) picks the request field that returns a
chat prompt's ids (:data:`phaseaware.endpoints.usage.PROMPT_IDS_FIELDS`): adapters ask
for them and check ids, not counts.

Anything else is ``None`` (unknown, not an error: the probe measures it the same way).
"""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
from typing import TYPE_CHECKING

from phaseaware.endpoints.record import EndpointRecord
from phaseaware.endpoints.values import shown_text
from phaseaware.errors import PhaseawareWarning
from phaseaware.tokenizers.base import ChatTemplateTokenizer, Tokenizer

if TYPE_CHECKING:  # pragma: no cover
    import openai

__all__ = [
    "LLAMA_CPP_PYTHON_TITLE",
    "ServerIdentity",
    "identify",
    "identify_server",
    "server_identity",
    "template_sha256",
    "with_server",
]

LLAMA_CPP_PYTHON_TITLE = "llama.cpp Python API"


@dataclasses.dataclass(frozen=True)
class ServerIdentity:
    """What a server says it is: ``name`` (``"llama-cpp-python 0.3.36"``,
    ``"llama.cpp llama-server b1-0c1e570"``) and the chat template it renders, when it
    publishes one (llama-server's ``/props``)."""

    name: str
    chat_template: str | None = None
    renderer: str | None = None  # how it renders DeepSeek formats (ChatSettings.renderer)


def _get(client: openai.OpenAI, url: str) -> object:
    import openai

    try:
        return client.with_options(max_retries=0, timeout=10.0).get(url, cast_to=object)
    except (openai.APIError, ValueError):  # ValueError: a body that is not JSON
        return None


def server_identity(client: openai.OpenAI, base: str) -> ServerIdentity | None:
    """The server software at ``base`` (the ``/v1`` base URL or its root), else ``None``;
    at most five ``GET`` requests, never an error."""
    return _identify(client, base)[0]


def _identify(client: openai.OpenAI, base: str) -> tuple[ServerIdentity | None, int]:
    """:func:`server_identity` and the number of requests it sent."""
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    doc = _get(client, root + "/openapi.json")
    info = doc.get("info") if isinstance(doc, dict) else None
    title = info.get("title") if isinstance(info, dict) else None
    if isinstance(title, str) and LLAMA_CPP_PYTHON_TITLE in title:
        version = info.get("version") if isinstance(info, dict) else None
        name = (  # the server's own words: escaped, cut, before they reach a terminal
            f"llama-cpp-python {shown_text(version, limit=80)}"
            if isinstance(version, str)
            else "llama-cpp-python"
        )
        return ServerIdentity(name), 1
    props = _get(client, root + "/props")
    build = props.get("build_info") if isinstance(props, dict) else None
    if isinstance(props, dict) and isinstance(build, str) and build:
        template = props.get("chat_template")
        served = template if isinstance(template, str) and template else None
        return ServerIdentity(f"llama.cpp llama-server {shown_text(build, limit=80)}", served), 2
    requests = 2
    for route in ("/server_info", "/get_server_info"):
        info = _get(client, root + route)
        requests += 1
        if isinstance(info, dict):
            version = info.get("version")
            if isinstance(version, str) and version and "model_path" in info:
                shown = shown_text(version, limit=80)  # the server's words: escaped, cut
                return ServerIdentity(f"sglang {shown}", renderer="sglang"), requests
            break  # answered, but not as SGLang does
    version = _get(client, root + "/version")
    requests += 1
    if isinstance(version, dict) and set(version) == {"version"}:
        number = version["version"]
        if isinstance(number, str) and number:
            return ServerIdentity(f"vllm {shown_text(number, limit=80)}"), requests
    return None, requests


def identify(client: openai.OpenAI, base: str) -> tuple[ServerIdentity | None, int]:
    """:func:`server_identity` and the number of requests it sent (the probe identifies the
    server first: it renders DeepSeek formats with the server's renderer)."""
    return _identify(client, base)


def identify_server(client: openai.OpenAI, base: str) -> str | None:
    """The name of the server software at ``base`` (see :func:`server_identity`)."""
    found = server_identity(client, base)
    return found.name if found is not None else None


def template_sha256(template: str | None) -> str | None:
    """The sha256 (hex) of a Jinja chat template's source, ``None`` without one."""
    return hashlib.sha256(template.encode("utf-8")).hexdigest() if template else None


def _same_template(served: str, template: str | None) -> bool:
    """Equal as Jinja renders them: it drops one trailing newline of a template (llama-server
    publishes the template without it)."""

    def rendered_source(text: str) -> str:
        return text[:-1] if text.endswith("\n") else text

    return template is not None and rendered_source(served) == rendered_source(template)


def with_server(
    record: EndpointRecord,
    *,
    client: openai.OpenAI,
    base: str,
    tokenizer: Tokenizer,
    identified: tuple[ServerIdentity | None, int] | None = None,
) -> EndpointRecord:
    """``record`` with the server software (a few more requests, unless ``identified``
    gives :func:`identify`'s answer already) and, for the ``hf`` format, the sha256 of
    the tokenizer's template the probes were rendered with; warns when the server
    publishes another template."""
    template = tokenizer.chat_template if isinstance(tokenizer, ChatTemplateTokenizer) else None
    found, requests = identified if identified is not None else _identify(client, base)
    served = found.chat_template if found is not None else None
    if record.chat_format == "hf" and served is not None and not _same_template(served, template):
        warnings.warn(
            f"{record.base_url} renders chat template sha256 {template_sha256(served)}, not "
            f"the tokenizer's ({template_sha256(template)}): the probes agreed, but other "
            "messages (tools, several turns) may render differently; pass the server's GGUF "
            "as the tokenizer (hf:<file.gguf>) or start the server with the same template",
            PhaseawareWarning,
            stacklevel=3,
        )
    return dataclasses.replace(
        record,
        probes=record.probes + requests,
        server=found.name if found is not None else None,
        chat_template_sha256=template_sha256(template) if record.chat_format == "hf" else None,
    )
