"""``probe-endpoint`` against the real llama.cpp server: recognised, template recorded.

llama-cpp-python has no chat ``/tokenize`` (its ``/extras/tokenize`` takes text), so the
probe counts: offset 0, constant (the GGUF's template adds nothing phaseaware did not
render). The record names the server and the sha256 of the GGUF's own template, and the
CLI prints both.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from phaseaware.endpoints import probe_endpoint
from phaseaware.tokenizers import load_tokenizer
from tests.e2e.llamacpp.conftest import record
from tests.support.llamacpp_server import LlamaCppServer


def test_probe_recognises_llama_cpp_and_records_the_gguf_template(
    llamacpp: LlamaCppServer, tmp_path
):
    tok = load_tokenizer(f"hf:{llamacpp.gguf}")
    found = probe_endpoint(
        base_url=llamacpp.base_url, model=llamacpp.model, tokenizer=tok, chat_format="hf",
        rounds=2, save=False,
    )  # fmt: skip
    assert found.mode == "count" and found.stability == "constant" and found.offset == 0
    assert found.server == "llama-cpp-python 0.3.36"
    assert tok.chat_template is not None and "SmolLM" in tok.chat_template  # the GGUF's own
    assert found.chat_template_sha256 == hashlib.sha256(tok.chat_template.encode()).hexdigest()
    record("probe-endpoint: offset 0, server, template", True)

    out = subprocess.run(
        [sys.executable, "-m", "phaseaware", "probe-endpoint", "--base-url", llamacpp.base_url,
         "--model", llamacpp.model, "--tokenizer", f"hf:{llamacpp.gguf}", "--chat-format", "hf",
         "--rounds", "2", "--json"],
        capture_output=True, text=True, timeout=600, env=_home(tmp_path),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (
        doc["server"] == found.server and doc["chat_template_sha256"] == found.chat_template_sha256
    )


def _home(tmp_path) -> dict[str, str]:
    import os

    return {**os.environ, "PHASEAWARE_HOME": str(tmp_path)}


def _tool_arguments_round_trip(server: LlamaCppServer, expected: str) -> None:
    """The probe finds how the server hands tool-call arguments to the template, and a plan
    made with that record counts exactly what the server counts for a tool-call history."""
    import openai

    from phaseaware import AssemblyRequest
    from phaseaware.endpoints.tool_arguments import TOOL_HISTORY
    from phaseaware.integrate import rendered_tokens, resolve_target

    tok = load_tokenizer(f"hf:{server.gguf}")
    found = probe_endpoint(
        base_url=server.base_url, model=server.model, tokenizer=tok, chat_format="hf",
        rounds=2, save=False,
    )  # fmt: skip
    assert found.tool_arguments == expected
    target = resolve_target(AssemblyRequest(tokenizer=tok, chat_format="hf"), endpoint=found)
    assert target.settings is not None and target.settings.tool_arguments == expected
    client = openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0)
    reply = client.chat.completions.create(
        model=server.model, messages=list(TOOL_HISTORY), max_tokens=1, temperature=0,  # type: ignore[arg-type]
    )  # fmt: skip
    assert reply.usage is not None
    planned = rendered_tokens(target, TOOL_HISTORY)
    ok = reply.usage.prompt_tokens == planned + found.offset
    record(f"probe-endpoint tool_arguments={expected!r}: plan counts as the server", ok)
    assert ok, (reply.usage.prompt_tokens, planned, found.offset)


def test_probe_finds_llama_cpp_python_passes_tool_arguments_as_text(
    llamacpp_tools: LlamaCppServer,
) -> None:
    _tool_arguments_round_trip(llamacpp_tools, "string")
